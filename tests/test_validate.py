"""Strict validation and the free-text judge parsers."""

import pytest

from hf_judge import load_metric, parse_binary_verdict, parse_pair_scores
from hf_judge.judging.validate import ReplyError, parse_reply


@pytest.fixture(scope="module")
def clarity(tmp_path_factory):
    d = tmp_path_factory.mktemp("p")
    (d / "QA_Clar.jinja").write_text(
        "---\noutputs:\n  reason: {type: string}\n  score: {type: integer, minimum: 1, maximum: 10}\n---\n"
        "{{ instruction }} {{ output }}\n"
    )
    return load_metric("QA_Clar", prompts_dir=d)


@pytest.mark.parametrize(
    "content, kind",
    [
        ('{"reason": "ok", "score": 7.9}', "schema"),
        ('{"reason": "ok", "score": "8"}', "schema"),
        ('{"reason": "ok", "score": "7.5"}', "schema"),
        ('{"reason": "ok", "score": true}', "schema"),
        ('{"reason": "ok", "score": 11}', "out_of_range"),
        ('{"reason": "ok", "score": 0}', "out_of_range"),
        ('{"reason": "ok"}', "schema"),
        ('{"reason": "ok", "score": 7, "extra": 1}', "schema"),
        ('{"why": "ok", "score": 7}', "schema"),
        ('{"reason": 3, "score": 7}', "schema"),
        ("[7]", "schema"),
        ('{"reason": "ok", "score": ', "invalid_json"),
        ("Score: 7", "invalid_json"),
        ("", "empty"),
        (None, "empty"),
    ],
)
def test_invalid_replies_are_rejected_with_their_kind(clarity, content, kind):
    with pytest.raises(ReplyError) as e:
        parse_reply(clarity, content, "stop")
    assert e.value.kind == kind


def test_valid_reply_and_finish_reasons(clarity):
    assert parse_reply(clarity, '{"reason": "clear", "score": 7}', "stop") == {"reason": "clear", "score": 7}
    with pytest.raises(ReplyError) as e:
        parse_reply(clarity, '{"reason": "clear", "score": 7}', "length")
    assert e.value.kind == "truncated"
    with pytest.raises(ReplyError) as e:
        parse_reply(clarity, "", "content_filter")
    assert e.value.kind == "content_filter"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("0\nThe answer 12 is wrong", "0"),
        ("1", "1"),
        ("The final answer matches.\n1", "1"),
        ("**1**", "1"),
        ("Verdict: 0.", "0"),
    ],
)
def test_binary_verdict_tokens(text, expected):
    assert parse_binary_verdict(text, "1", "0") == expected


@pytest.mark.parametrize("text, expected", [("**Yes**", "yes"), ("yes.", "yes"), ("No", "no"), ("`YES`", "yes")])
def test_binary_yes_no(text, expected):
    assert parse_binary_verdict(text, "yes", "no") == expected


@pytest.mark.parametrize("text", ["Yes, but no.", "The answer is 10", "maybe", "10", "yes and no", "Not yes"])
def test_binary_never_guesses(text):
    with pytest.raises(ReplyError) as e:
        parse_binary_verdict(text, "yes", "no") if "yes" in text.lower() or "maybe" in text else parse_binary_verdict(
            text, "1", "0"
        )
    assert e.value.kind == "unparseable"


def test_binary_substring_is_not_a_verdict():
    # the seed-001 parser read this as positive because "1" occurs in it
    with pytest.raises(ReplyError):
        parse_binary_verdict("The answer 12 is wrong", "1", "0")


@pytest.mark.parametrize(
    "text, expected", [("8 7", (8, 7)), ("8 7\nAssistant 1 is better", (8, 7)), ("8, 7", (8, 7)), ("10 1", (10, 1))]
)
def test_pair_scores(text, expected):
    assert parse_pair_scores(text, 1, 10) == expected


@pytest.mark.parametrize("text", ["Assistant 1: 8, Assistant 2: 7", "8/10 7/10", "8", "8 7 6", "8.5 7", "Scores: 8 7"])
def test_pair_scores_refuses_to_guess(text):
    with pytest.raises(ReplyError) as e:
        parse_pair_scores(text, 1, 10)
    assert e.value.kind == "unparseable"


def test_pair_scores_out_of_range():
    with pytest.raises(ReplyError) as e:
        parse_pair_scores("11 7", 1, 10)
    assert e.value.kind == "out_of_range"


@pytest.mark.parametrize(
    "content, expected",
    [
        ("1", "1"),
        ("0", "0"),
        ('"1"', "1"),
        ('"0"', "0"),
        ('"**1**"', "1"),
        ("```json\n1\n```", "1"),
        ('"Reasoning.\\n0"', "0"),
    ],
)
def test_binary_reply_that_is_a_json_scalar_gets_the_verdict_rules(content, expected):
    # "1" is what the seed-001 prompt asks for; it is also valid JSON and used to fail the object schema
    assert parse_reply(load_metric("Binary"), content, "stop") == {"verdict": expected}


@pytest.mark.parametrize(
    "content, kind",
    [
        ("2", "unparseable"),
        ("1.0", "unparseable"),
        ("true", "unparseable"),
        ('"yes"', "unparseable"),
        ("[1]", "schema"),
        ('{"verdict": 1}', "schema"),
    ],
)
def test_binary_json_scalar_is_not_coerced(content, kind):
    with pytest.raises(ReplyError) as e:
        parse_reply(load_metric("Binary"), content, "stop")
    assert e.value.kind == kind


@pytest.mark.parametrize(
    "content, expected",
    [
        ("[8, 7]", (8, 7, "")),
        ('"8 7"', (8, 7, "")),
        ('"8 7\\nAssistant 1 is precise."', (8, 7, "Assistant 1 is precise.")),
    ],
)
def test_pair_reply_that_is_a_json_array_or_string_gets_the_pair_rules(content, expected):
    value = parse_reply(load_metric("Comparative", swap=False), content, "stop")
    assert (value["score_1"], value["score_2"], value["explanation"]) == expected


@pytest.mark.parametrize(
    "content, kind",
    [
        ("[8.5, 7]", "unparseable"),
        ("[8.0, 7]", "unparseable"),
        ("[11, 7]", "out_of_range"),
        ('"8 11"', "out_of_range"),
        ("[8]", "unparseable"),
        ("[8, 7, 6]", "unparseable"),
        ("8", "unparseable"),
        ('["8", "7"]', "schema"),
        ("[true, 7]", "schema"),
    ],
)
def test_pair_json_forms_are_not_coerced(content, kind):
    with pytest.raises(ReplyError) as e:
        parse_reply(load_metric("Comparative", swap=False), content, "stop")
    assert e.value.kind == kind


@pytest.mark.parametrize("content", ["7", '"8"', "[7, 8]", '"7 8"'])
def test_score_metric_never_takes_a_bare_json_value(clarity, content):
    with pytest.raises(ReplyError) as e:
        parse_reply(clarity, content, "stop")
    assert e.value.kind == "schema"


def test_binary_metric_with_a_reason_output_reads_free_text(tmp_path):
    (tmp_path / "Graded.jinja").write_text(
        '---\nkind: binary\nparams: {positive: "yes", negative: "no"}\noutputs:\n'
        '  reason: {type: string}\n  verdict: {type: string, enum: ["yes", "no"]}\n---\n{{ question }}\n'
    )
    m = load_metric("Graded", prompts_dir=tmp_path)
    assert parse_reply(m, "It matches.\nyes", "stop") == {"verdict": "yes", "reason": "It matches.\nyes"}
