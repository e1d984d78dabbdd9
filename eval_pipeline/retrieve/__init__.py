"""Retrieval and answering: what the graph hands back for a question, and the answer read from it.

Everything a retrieval agent sends to the graph first passes the read-only guard in
`readonly_guard` (see issue 5, "Read-only, enforced twice").
"""
