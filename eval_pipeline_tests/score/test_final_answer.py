"""What a response concludes: the part the answer rules read (`score.final_answer`)."""

from eval_pipeline.score.final_answer import final_answer

REASONING = (
    "To determine how long your commute is, let's look at the sessions. In Session 3 you said "
    "it takes 45 minutes each way. In Session 9 you mentioned the bus had been late twice, "
    "which added about ten minutes on those days, but that was not your usual commute. "
)


def test_an_explicit_answer_marker_decides_whatever_comes_before():
    fa = final_answer(REASONING + "\n\nFinal Answer: 45 minutes each way.")
    assert (fa.how, fa.text) == ("marker", "45 minutes each way.")
    fa = final_answer(REASONING + "**Answer:** 45 minutes")
    assert (fa.how, fa.text) == ("marker", "45 minutes")
    fa = final_answer("<thinking>a lot of words here</thinking>\n<answer>Max</answer>")
    assert (fa.how, fa.text.strip()) == ("marker", "Max")


def test_a_long_response_concludes_from_its_last_conclusion_word():
    fa = final_answer(REASONING + "Therefore, your commute takes 45 minutes each way.")
    assert fa.how == "conclusion"
    assert fa.text == "Therefore, your commute takes 45 minutes each way."


def test_its_last_sentence_when_it_restates_the_question():
    text = REASONING + "Your daily commute to work is 45 minutes each way."
    fa = final_answer(text, "How long is my daily commute to work?")
    assert (fa.how, fa.text) == (
        "restatement",
        "Your daily commute to work is 45 minutes each way.",
    )
    # a condition is not the answer
    cond = REASONING + "If the bus is late, your daily commute to work is 55 minutes."
    assert final_answer(cond, "How long is my daily commute to work?").how == "whole"


def test_closing_offers_and_questions_back_are_never_the_answer():
    text = (
        REASONING + "So it is 45 minutes each way. Let me know if you want more detail! "
        "Would you like me to compare it with last year?"
    )
    fa = final_answer(text)
    assert fa.how == "conclusion" and fa.text.endswith("45 minutes each way.")


def test_a_short_response_is_its_own_answer_and_emphasis_goes_not_words():
    fa = final_answer("You went with **the green sofa**, after all.")
    assert (fa.how, fa.text) == ("whole", "You went with the green sofa, after all.")
    assert fa.words == 8
