"""The default judge says yes only to an answer that commits to the reference (issue 38).

Each case is written here for the rule it states; none is taken from a labelled set. The
decision is the `match` method's (the rules, then the coverage threshold), as a run makes it.
"""

from __future__ import annotations

import pytest

from eval_pipeline.score.answer_match import decide
from eval_pipeline.score.verdicts import combine


def judged(reference, response, question="What was it?", qtype="single-session-user",
           abstention=False):  # fmt: skip
    match = decide(
        reference, response, question_type=qtype, abstention=abstention, question=question
    )
    return combine("match", match, None, rubric=qtype == "single-session-preference")[0]


@pytest.mark.parametrize(
    ("reference", "response", "question"),
    [
        # a list of candidates, an either/or
        ("Max", "Max, Bella or Rocky: it's one of those three.", "What did I name my puppy?"),
        ("the blue sofa", "You were deciding between the blue sofa and the green sofa.",
         "Which sofa did I order?"),
        ("$1,200", "It was either $1,200 or $1,500.", "How much was the deposit?"),
        # the question's options restated, none chosen
        ("The green sofa", "You looked at the blue sofa and the green sofa for the lounge.",
         "Did I go with the blue sofa or the green sofa in the end?"),
        # the reference inside another name, inside a negation
        ("York", "New York.", "Which city did my cousin move to?"),
        ("Target", "It wasn't Target: you ordered it from Walmart.", "Where did I buy it?"),
        # the right number with another unit or currency
        ("24 °C", "It reached 24 °F that afternoon.", "How warm was it?"),
        ("12.5 km", "7.5 + 5 = 12.5, so you cycled 12.5 miles.", "How far did I cycle?"),
        ("$1,200", "The deposit was €1,200.", "How much was the deposit?"),
        # a pasted passage or transcript instead of an answer
        ("Max", "[2023-05-30 10:12, user] I think I'll adopt Max from the shelter next week.",
         "What did I name my puppy?"),
        # a refusal followed by a guess
        ("Luna", "You never mentioned your cat's name. It might be Luna.",
         "What is my cat's name?"),
        # what was true before an update
        ("Brightline", "You moved from Brightline to Corvid Health in the spring.",
         "Where do I work now?"),
    ],
)  # fmt: skip
def test_an_answer_that_does_not_commit_is_no(reference, response, question):
    assert judged(reference, response, question) == "no"


@pytest.mark.parametrize(
    ("reference", "response", "question", "qtype"),
    [
        ("13", "You baked a baker's dozen.", "How many cupcakes did I bake?", "multi-session"),
        ("14 days", "It took a fortnight.", "How long did delivery take?", "multi-session"),
        ("90 minutes", "About an hour and a half.", "How long was the film?", "multi-session"),
        ("18 months", "You'd been at it for a year and a half.", "How long have I been "
         "learning Portuguese?", "multi-session"),
        ("1.5 litres", "You drink 1500 ml a day.", "How much water do I drink?", "multi-session"),
        ("every week", "You see her weekly now.", "How often do I see my therapist?",
         "knowledge-update"),
        ("$1,200", "It cost 1200 dollars.", "How much was the deposit?", "multi-session"),
        # the updated value beside the old one
        ("4", "You went from 3 to 4 times a week.", "How often do I go to the gym?",
         "knowledge-update"),
        # a count off by one under the temporal rule, one of the reference's alternatives
        ("3 days ago. 4 days (including the last day) is also acceptable.",
         "That was 4 days ago.", "How many days ago did I buy it?", "temporal-reasoning"),
    ],
)  # fmt: skip
def test_an_equivalent_answer_is_yes(reference, response, question, qtype):
    assert judged(reference, response, question, qtype) == "yes"


def test_a_long_response_is_judged_by_what_it_concludes():
    question = "How many hours do I work in a peak week?"
    steps = (
        "To determine this, let's extract the relevant information. In Session 5 you said "
        "you usually work 40 hours a week, and some weeks go up to 45 hours. In Session 17 "
        "you said peak campaign seasons add 10 hours a week. "
    )
    assert judged("50", steps + "Therefore, you work 50 hours in a peak week.", question) == "yes"
    assert judged("45", steps + "Therefore, you work 50 hours in a peak week.", question) == "no"
    assert judged("50", steps + "\n\nFinal Answer: 50 hours", question) == "yes"


def test_abstention_phrased_in_other_words_and_answers_that_invent():
    q, ref = "What brand is my new vacuum?", "You mentioned the vacuum but not its brand."
    for refusal in (
        "You told me you bought a new vacuum, but not what brand it was.",
        "That never came up between us, so I can't say which brand it is.",
        "There isn't a specific mention of the brand in our conversations.",
    ):
        assert judged(ref, refusal, q, abstention=True) == "yes", refusal
    for invented in (
        "It's a Dyson V11.",
        "I don't have the brand on record, but it was most likely a Dyson.",
    ):
        assert judged(ref, invented, q, abstention=True) == "no", invented


def test_an_either_or_answer_is_read_for_its_choice():
    q = "Which happened first, the trip to Kyoto or my sister's graduation?"
    assert judged("The trip to Kyoto", "The trip to Kyoto came first, followed by the "
                  "graduation.", q, "temporal-reasoning") == "yes"  # fmt: skip
    assert judged("The trip to Kyoto", "Your sister's graduation happened before the trip "
                  "to Kyoto.", q, "temporal-reasoning") == "no"  # fmt: skip


def test_an_empty_answer_is_no():
    assert judged("Max", "") == "no"
    assert judged("never mentioned", "   ", abstention=True) == "no"
