"""A small DOM from the standard library's html.parser, so report tests read the page as a
browser would (elements, attributes, decoded text), not by grepping its source."""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser

VOID = {"meta", "br", "hr", "img", "input", "link", "wbr"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Node | None = None):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self) -> Iterator[Node]:
        for child in self.children:
            if isinstance(child, Node):
                yield child
                yield from child.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list:
        return [
            n
            for n in self.iter()
            if (tag is None or n.tag == tag)
            and (cls is None or cls in n.classes)
            and all(n.attrs.get(k) == v for k, v in attrs.items())
        ]

    def find(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Node:
        found = self.find_all(tag, cls, **attrs)
        assert found, f"no <{tag} class={cls} {attrs}>"
        return found[0]

    def next_siblings(self) -> list[Node]:
        assert self.parent is not None
        nodes = [c for c in self.parent.children if isinstance(c, Node)]
        return nodes[nodes.index(self) + 1 :]

    def rows(self) -> list[list[str]]:
        """A table's body rows as cell texts."""
        body = self.find_all("tbody") or [self]
        return [[td.text() for td in tr.find_all("td")] for tr in body[0].find_all("tr")]

    def headers(self) -> list[str]:
        """A table's column headers (none for a table without a head)."""
        head = self.find_all("thead")
        return [th.text() for th in head[0].find_all("th")] if head else []


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Node(tag, dict(attrs), self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not self.root and node.tag != tag:
            node = node.parent
        assert node is not self.root, f"unbalanced </{tag}>"
        self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    assert builder.current is builder.root, f"unclosed <{builder.current.tag}>"
    return builder.root
