"""Every answer a LongMemEval reference accepts (`score.reference_answer.accepted`)."""

from eval_pipeline.score.reference_answer import accepted


def test_an_also_acceptable_count_is_an_alternative():
    ref = "3 days ago. 4 days (including the last day) is also acceptable."
    assert accepted(ref) == ["3 days ago", "4 days"]


def test_a_range_accepts_every_count_in_it():
    ref = "One week. Answers ranging from 7 days to 10 days are also acceptable."
    assert accepted(ref) == ["One week", "7 days", "10 days", "8 days", "9 days"]


def test_an_alternative_or_an_alias_in_parentheses():
    assert accepted("11 days (or 12 days, if April 15th to 22nd is 8 days)") == [
        "11 days",
        "12 days",
    ]
    ucla = "University of California, Los Angeles (UCLA)"
    assert accepted(ucla)[:2] == ["University of California, Los Angeles", "UCLA"]


def test_an_update_wants_what_is_current_and_a_sum_its_total():
    ref = (
        "Previously, you play tennis with your friends every week (on Sunday). Currently, you "
        "play tennis every other week (on Sunday)."
    )
    assert accepted(ref) == ["you play tennis every other week (on Sunday)"]
    total = "2 weeks for A, 4 weeks for B, and 2 weeks for C, so a total of 8 weeks."
    assert accepted(total) == ["8 weeks"]


def test_a_count_question_is_answered_by_its_count():
    ref = "I attended three weddings. The couples were Rachel and Mike, Emily and Sarah."
    assert accepted(ref, "How many weddings did I attend?") == ["I attended three weddings"]
    doctors = "I visited three different doctors: a primary care physician and an ENT."
    assert accepted(doctors, "How many doctors did I visit?") == [
        "I visited three different doctors"
    ]
    # the same shape for another question is taken as written
    assert accepted(ref, "Whose weddings did I attend?") == [ref]
