"""Readers: real shared data (counts from shared/data/README.md) and hand-made files in the real formats."""
from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from bertforge.tasks import (
    CONLL2003_LABELS,
    TASKS,
    DataError,
    SquadExample,
    get_task,
    glue_labels,
    infer_label_list,
    read_classification,
    read_conll,
    read_glue,
    read_squad,
    read_swag,
    split_squad_by_article,
)
from bertforge.tasks.readers import locate_answer, ner_label_list, numeric_labels, read_ner, read_qa


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


# --------------------------------------------------------------------------- GLUE, real files

GLUE_REAL = [  # task, file, rows, label counts (README of shared/data)
    ("sst2", "SST-2/dev.tsv", 872, {"0": 428, "1": 444}),
    ("sst2", "SST-2/train.tsv", 67_349, {"0": 29_780, "1": 37_569}),
    ("cola", "CoLA/train.tsv", 8_551, {"1": 6_023, "0": 2_528}),
    ("cola", "CoLA/dev.tsv", 1_043, {"1": 721, "0": 322}),
    ("mrpc", "MRPC/train.tsv", 3_668, {"1": 2_474, "0": 1_194}),
    ("mrpc", "MRPC/dev.tsv", 408, {"1": 279, "0": 129}),
    ("rte", "RTE/train.tsv", 2_490, {"entailment": 1_249, "not_entailment": 1_241}),
    ("rte", "RTE/dev.tsv", 277, {"entailment": 146, "not_entailment": 131}),
    ("qnli", "QNLI/dev.tsv", 5_463, {"entailment": 2_702, "not_entailment": 2_761}),
    ("wnli", "WNLI/train.tsv", 635, {"1": 312, "0": 323}),
    ("wnli", "WNLI/dev.tsv", 71, {"0": 40, "1": 31}),
]


@pytest.mark.parametrize("task,name,rows,counts", GLUE_REAL, ids=[f"{t}-{n}" for t, n, *_ in GLUE_REAL])
def test_glue_real_counts(shared_data: Path, task: str, name: str, rows: int, counts: dict[str, int]) -> None:
    result = read_glue(task, shared_data / "glue" / name)
    assert len(result) == rows
    assert dict(Counter(ex.label for ex in result)) == counts
    assert result.skipped == 0
    assert result.labels == glue_labels(task)
    assert all(ex.text for ex in result)
    assert len({ex.guid for ex in result}) == rows


def test_glue_real_columns(shared_data: Path) -> None:
    glue = shared_data / "glue"
    cola = read_glue("cola", glue / "CoLA/dev.tsv")  # no header: the first line is a data row
    assert cola[0].line == 1 and cola[0].text == "The sailors rode the breeze clear of the rocks."
    assert cola[0].text_pair is None
    mrpc = read_glue("mrpc", glue / "MRPC/dev.tsv")
    # A row whose second sentence opens with an unbalanced quote: CSV quoting would eat rows.
    assert mrpc[0].text_pair.startswith('" The foodservice pie business')
    assert mrpc[0].label == "1" and mrpc[0].line == 2
    qnli = read_glue("qnli", glue / "QNLI/dev.tsv")
    assert qnli[0].text == "What came into force after the new constitution was herald?"
    assert qnli[0].label == "entailment" and qnli[0].guid == "dev-0"


def test_stsb_real_scores(shared_data: Path) -> None:
    for name, rows in (("train.tsv", 5_749), ("dev.tsv", 1_500)):
        result = read_glue("stsb", shared_data / "glue/STS-B" / name)
        assert len(result) == rows and result.labels is None
        assert all(isinstance(ex.label, float) and 0.0 <= ex.label <= 5.0 for ex in result)
    first = read_glue("stsb", shared_data / "glue/STS-B/dev.tsv")[0]
    assert (first.text, first.text_pair, first.label) == (
        "A man with a hard hat is dancing.", "A man wearing a hard hat is dancing.", 5.0)


# --------------------------------------------------------------------------- GLUE, hand-made files

MNLI_DEV_HEADER = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
                   "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\t"
                   "label5\tgold_label\n")


def mnli_row(i: int, s1: str, s2: str, gold: str, n_labels: int = 5) -> str:
    parse = "( ( x ) )"
    return "\t".join([str(i), "1", f"{i}e", "fiction", parse, parse, "(ROOT x)", "(ROOT x)", s1, s2]
                     + [gold] * n_labels + [gold]) + "\n"


def test_mnli_dev_and_train_layouts(tmp_path: Path) -> None:
    dev = write(tmp_path / "dev_matched.tsv", MNLI_DEV_HEADER
                + mnli_row(0, "The new rights are nice enough", "Everyone really likes the newest benefits", "neutral")
                + mnli_row(1, 'He said "no.', "He refused.", "entailment")
                + mnli_row(2, "It rained.", "It was dry.", "contradiction"))
    result = read_glue("mnli", dev)
    assert [ex.label for ex in result] == ["neutral", "entailment", "contradiction"]
    assert result[1].text == 'He said "no.' and result[1].text_pair == "He refused."
    assert result[0].guid == "dev_matched-0"
    assert result.labels == ["contradiction", "entailment", "neutral"]
    train_header = MNLI_DEV_HEADER.replace("\tlabel2\tlabel3\tlabel4\tlabel5", "")
    train = write(tmp_path / "train.tsv", train_header + mnli_row(0, "A", "B", "neutral", n_labels=1))
    assert read_glue("mnli", train)[0].label == "neutral"
    test_header = "\t".join(MNLI_DEV_HEADER.split("\t")[:10]) + "\n"
    test = write(tmp_path / "test_matched.tsv", test_header + "\t".join(mnli_row(0, "A", "B", "x").split("\t")[:10]) + "\n")
    unlabeled = read_glue("mnli", test)
    assert unlabeled[0].label is None and unlabeled[0].text == "A" and unlabeled.labels is not None


def test_qqp_bad_row_raises_or_is_skipped(tmp_path: Path) -> None:
    path = write(tmp_path / "train.tsv",
                 "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                 "0\t1\t2\tHow do I learn Python?\tWhat is the best way to learn Python?\t1\n"
                 "1\t3\t4\tWhy is the sky blue?\n"  # truncated row, as in the real QQP train file
                 "2\t5\t6\tIs it \"safe\"?\tIs it safe?\t2\n"  # unknown label
                 "3\t7\t8\tWhat is 2+2?\tHow much is 2+2?\t1\n")
    with pytest.raises(DataError) as info:
        read_glue("qqp", path)
    message = str(info.value)
    assert str(path) in message and "line 3" in message and "'question2'" in message and "6 tab-separated" in message
    assert message.endswith("[2 bad rows in this file: this one, line 4; --skip-bad-rows skips and counts them]")
    assert info.value.line == 3 and info.value.field == "question2" and info.value.count == 2
    result = read_glue("qqp", path, skip_bad_rows=True)
    assert [ex.guid for ex in result] == ["train-0", "train-3"]
    assert result.skipped == 2
    assert [e.line for e in result.skipped_samples] == [3, 4]
    assert "'is_duplicate'" in str(result.skipped_samples[1]) and "one of ['0', '1']" in str(result.skipped_samples[1])
    assert "skipped 2 bad rows" in result.summary()


def test_stsb_bad_scores(tmp_path: Path) -> None:
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    row = "0\tmain-news\tx\t2012\t0001\tnone\tnone\tA\tB\t{}\n"
    for bad in ("high", "5.5", "nan", ""):
        path = write(tmp_path / "dev.tsv", header + row.format(bad))
        with pytest.raises(DataError, match=r"line 2, field 'score': expected a number between 0 and 5"):
            read_glue("stsb", path)
    assert read_glue("stsb", write(tmp_path / "ok.tsv", header + row.format("3.200")))[0].label == 3.2


def test_glue_test_files_and_labeled_flag(tmp_path: Path) -> None:
    cola_test = write(tmp_path / "test.tsv", "index\tsentence\n0\tBill whistled past the house.\n")
    result = read_glue("cola", cola_test)
    assert result[0].label is None and result[0].guid == "test-0" and result[0].line == 2
    with pytest.raises(DataError, match="labeled file"):
        read_glue("cola", cola_test, labeled=True)
    sst = write(tmp_path / "sst.tsv", "sentence\tlabel\ngood .\t1\n")
    assert read_glue("SST-2", sst, labeled=False)[0].label is None


def test_glue_stray_quotes_crlf_gzip_and_blank_tail(tmp_path: Path) -> None:
    text = 'sentence\tlabel\r\n" a lone quote opens this\t1\r\nand "this one\t0\r\n\r\n'
    plain = write(tmp_path / "dev.tsv", text)
    zipped = tmp_path / "dev.tsv.gz"
    zipped.write_bytes(gzip.compress(text.encode()))
    for path in (plain, zipped):
        result = read_glue("sst2", path)
        assert [(ex.text, ex.label) for ex in result] == [('" a lone quote opens this', "1"), ('and "this one', "0")]


def test_glue_missing_empty_and_header_only(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.tsv"):
        read_glue("rte", tmp_path / "nope.tsv")
    empty = write(tmp_path / "empty.tsv", "")
    with pytest.raises(DataError, match="empty file"):
        read_glue("rte", empty)
    header_only = write(tmp_path / "h.tsv", "index\tsentence1\tsentence2\tlabel\n")
    with pytest.raises(DataError, match="at least one data row"):
        read_glue("rte", header_only)
    wrong = write(tmp_path / "w.tsv", "index\tpremise\thypothesis\tlabel\n0\ta\tb\tentailment\n")
    with pytest.raises(DataError, match=r"line 1, field 'sentence1'"):
        read_glue("rte", wrong)
    all_bad = write(tmp_path / "b.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tyes\n")
    with pytest.raises(DataError, match="all 1 rows were bad"):
        read_glue("rte", all_bad, skip_bad_rows=True)
    with pytest.raises(KeyError, match="unknown GLUE task"):
        read_glue("glue9", all_bad)


def test_non_utf8_byte_is_blamed_on_its_line(tmp_path: Path) -> None:
    tsv = tmp_path / "dev.tsv"
    tsv.write_bytes(b"sentence\tlabel\n" + b"fine\t1\n" * 3000 + b"caf\xe9\t1\n")
    with pytest.raises(DataError, match=r"line 3002: expected UTF-8 text, got undecodable byte b'\\xe9' at column 4"):
        read_glue("sst2", tsv)
    csv_file = tmp_path / "dev.csv"
    csv_file.write_bytes(b'text,label\n"multi\nline",a\n\xff,b\n')
    with pytest.raises(DataError, match="line 4: expected UTF-8"):
        read_classification(csv_file)


def test_glue_extra_column_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "dev.tsv", "sentence\tlabel\na\tb\t1\n")
    with pytest.raises(DataError, match=r"line 2, field 'column 3': expected 2 tab-separated fields"):
        read_glue("sst2", path)


# --------------------------------------------------------------------------- generic data


def test_generic_csv_with_quotes_and_multiline_field(tmp_path: Path) -> None:
    path = write(tmp_path / "train.csv",
                 '\ufefftext,label\n"Great, really great",pos\n"two\nlines",neg\nmeh,neutral\n')
    result = read_classification(path)
    assert [(ex.text, ex.label, ex.line) for ex in result] == [
        ("Great, really great", "pos", 2), ("two\nlines", "neg", 3), ("meh", "neutral", 5)]
    assert result.labels == ["neg", "neutral", "pos"]  # inferred, sorted
    assert result[0].text_pair is None


def test_generic_tsv_aliases_and_given_labels(tmp_path: Path) -> None:
    path = write(tmp_path / "dev.tsv", "sentence1\tsentence2\tlabel\nA cat.\tA pet.\tyes\nA \"dog\tA cat.\tmaybe\n")
    with pytest.raises(DataError, match=r"line 3, field 'label': expected one of \['no', 'yes'\], got 'maybe'"):
        read_classification(path, label_list=["no", "yes"])
    result = read_classification(path, label_list=["no", "yes"], skip_bad_rows=True)
    assert len(result) == 1 and result.skipped == 1 and result.labels == ["no", "yes"]
    assert (result[0].text, result[0].text_pair) == ("A cat.", "A pet.")


def test_generic_jsonl_ints_invalid_json_and_inference(tmp_path: Path) -> None:
    path = write(tmp_path / "train.jsonl",
                 '{"text": "a", "label": 10}\n{"text": "b", "label": 2}\n\n{"text": "c", "label": 2\n'
                 '{"text": "d", "label": "10"}\n')
    with pytest.raises(DataError) as info:
        read_classification(path)
    assert info.value.line == 4 and "invalid JSON" in str(info.value) and str(path) in str(info.value)
    result = read_classification(path, skip_bad_rows=True)
    assert [ex.label for ex in result] == ["10", "2", "10"]
    assert result.labels == ["2", "10"]  # integer names sort numerically
    assert result.skipped == 1 and result.skipped_samples[0].line == 4
    assert infer_label_list(["b", "a", "b"]) == ["a", "b"]


def test_generic_missing_fields_regression_and_unlabeled(tmp_path: Path) -> None:
    path = write(tmp_path / "x.jsonl", '{"text": "a", "label": "pos"}\n{"text": "b"}\n{"label": "pos"}\n')
    with pytest.raises(DataError, match=r"line 2, field 'label': expected a label name"):
        read_classification(path)
    result = read_classification(path, skip_bad_rows=True)
    assert result.skipped == 2 and [e.field for e in result.skipped_samples] == ["label", "text"]
    reg = write(tmp_path / "r.csv", "text,label\na,0.5\nb,lots\n")
    with pytest.raises(DataError, match=r"line 3, field 'label': expected a finite number, got 'lots'"):
        read_classification(reg, regression=True)
    unl = read_classification(write(tmp_path / "u.jsonl", '{"text": "a"}\n'))
    assert unl[0].label is None and unl.labels is None
    with pytest.raises(DataError, match=r"field 'text': expected a column named one of"):
        read_classification(write(tmp_path / "n.csv", "review,label\na,1\n"))
    with pytest.raises(DataError, match=r"line 2, field 'label': expected 2 fields"):
        read_classification(write(tmp_path / "short.csv", "text,label\nonly text\n"))
    with pytest.raises(ValueError, match=r"data.txt: expected a .csv, .tsv, .jsonl, .parquet or .arrow file"):
        read_classification(write(tmp_path / "data.txt", "text\n"))
    with pytest.raises(DataError, match="empty file"):
        read_classification(write(tmp_path / "e.jsonl", ""))


# --------------------------------------------------------------------------- SQuAD


def test_squad_real_dev(shared_data: Path) -> None:
    result = read_squad(shared_data / "squad/dev-v1.1.json.gz")
    assert len(result) == 10_570 and result.n_articles == 48 and result.n_paragraphs == 2_067
    assert result.version == "1.1" and result.answer_mismatches == 0 and result.skipped == 0
    assert len({ex.qid for ex in result}) == 10_570
    assert max(len(ex.answers) for ex in result) > 1  # dev keeps every annotator's answer
    assert not any(ex.is_impossible for ex in result)
    train, dev = split_squad_by_article(result)
    assert {ex.article_index for ex in train} == set(range(38))
    assert {ex.article_index for ex in dev} == set(range(38, 48))
    assert (len(train), len(dev)) == (8_582, 1_988)


def squad_json(version: str, qas: list[dict], context: str = "The Broncos beat the Panthers in Santa Clara.") -> dict:
    return {"version": version, "data": [{"title": "SB50", "paragraphs": [{"context": context, "qas": qas}]}]}


def test_squad_v2_and_mismatch_count(tmp_path: Path) -> None:
    data = squad_json("v2.0", [
        {"id": "q1", "question": "Who won?", "is_impossible": False,
         "answers": [{"text": "The Broncos", "answer_start": 0}, {"text": "Broncos", "answer_start": 4}]},
        {"id": "q2", "question": "Who lost badly?", "is_impossible": True, "answers": [],
         "plausible_answers": [{"text": "the Panthers", "answer_start": 17}]},
        {"id": "q3", "question": "Where?", "is_impossible": False,
         "answers": [{"text": "Santa Clara", "answer_start": 3}]},  # wrong offset, text nearby: re-anchored
    ])
    path = tmp_path / "dev-v2.0.json.gz"
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    result = read_squad(path)
    assert result.version == "2.0" and [ex.is_impossible for ex in result] == [False, True, False]
    assert result[0].answers[1].text == "Broncos" and result[1].plausible_answers[0].answer_start == 17
    assert result.answer_mismatches == result.answers_reanchored == 1 and "q3" in result.mismatch_samples[0]
    assert result[2].answers[0].answer_start == 33 and result[2].context[33:44] == "Santa Clara"
    assert result[0].title == "SB50" and result[2].paragraph_index == 0


def test_squad_bad_questions(tmp_path: Path) -> None:
    data = squad_json("1.1", [
        {"id": "q1", "question": "Who won?", "answers": [{"text": "Broncos", "answer_start": "4"}]},
        {"id": "q2", "question": "Who lost?", "answers": [{"text": "Panthers", "answer_start": 21}]},
        {"id": "q2", "question": "Again?", "answers": [{"text": "Panthers", "answer_start": 21}]},
        {"id": "q4", "question": "Nothing?", "answers": []},
    ])
    path = write(tmp_path / "train.json", json.dumps(data))
    with pytest.raises(DataError) as info:
        read_squad(path)
    message = str(info.value)
    assert str(path) in message and "data[0].paragraphs[0].qas[0].answers[0]" in message
    assert "'answer_start': expected an integer, got '4'" in message
    result = read_squad(path, skip_bad_rows=True)
    assert [ex.qid for ex in result] == ["q2"] and result.skipped == 3
    assert [e.field for e in result.skipped_samples] == ["answer_start", "id", "answers"]
    broken = write(tmp_path / "broken.json", '{"data": [\n{"title": "x",,}]}')
    with pytest.raises(DataError, match=r"line 2: expected valid JSON"):
        read_squad(broken)
    with pytest.raises(DataError, match="'data' list"):
        read_squad(write(tmp_path / "list.json", "[]"))
    with pytest.raises(DataError, match="empty file"):
        read_squad(write(tmp_path / "empty.json", ""))


def test_split_squad_by_article_forms() -> None:
    data = {"version": "1.1", "data": [{"title": str(i), "paragraphs": []} for i in range(5)]}
    train, dev = split_squad_by_article(data, range(0, 3), range(3, 5))
    assert [a["title"] for a in train["data"]] == ["0", "1", "2"] and dev["version"] == "1.1"
    assert [a["title"] for a in dev["data"]] == ["3", "4"]
    with pytest.raises(ValueError, match="overlap"):
        split_squad_by_article(data, range(0, 3), range(2, 5))
    with pytest.raises(ValueError, match="do not exist"):
        split_squad_by_article(data)  # the default 0-37 / 38-47 needs 48 articles
    ex = [SquadExample(f"q{i}", "?", "c", (), article_index=i % 2) for i in range(4)]
    a, b = split_squad_by_article(ex, [0], [1])
    assert [e.qid for e in a] == ["q0", "q2"] and [e.qid for e in b] == ["q1", "q3"]


# --------------------------------------------------------------------------- CoNLL-2003


@pytest.mark.parametrize("name,sentences,tokens,entities,documents", [
    ("train.txt", 14_041, 203_621, 23_499, 946),
    ("valid.txt", 3_250, 51_362, 5_942, 216),
    ("test.txt", 3_453, 46_435, 5_648, 231),
])
def test_conll_real_counts(shared_data: Path, name: str, sentences: int, tokens: int, entities: int,
                           documents: int) -> None:
    result = read_conll(shared_data / "conll2003" / name)
    assert len(result) == sentences
    assert sum(len(s.words) for s in result) == tokens
    assert sum(tag.startswith("B-") for s in result for tag in s.tags) == entities
    assert result[-1].document + 1 == documents
    assert result.labels == CONLL2003_LABELS


def test_conll_real_first_sentence(shared_data: Path) -> None:
    first = read_conll(shared_data / "conll2003/train.txt")[0]
    assert first.words == ("EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", ".")
    assert first.tags == ("B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O")
    assert first.line == 3 and first.document == 0


def test_conll_hand_made_and_bad_tags(tmp_path: Path) -> None:
    path = write(tmp_path / "dev.txt",
                 "-DOCSTART- -X- -X- O\n\n"
                 "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n\n\n"
                 "BRUSSELS NNP B-NP B-LOCATION\n1996-08-22 CD I-NP O\n\n"
                 "-DOCSTART- -X- -X- O\n\nOK UH O O\n")
    with pytest.raises(DataError, match=r"line 7, field 'NER tag': expected one of .*got 'B-LOCATION'"):
        read_conll(path)
    result = read_conll(path, skip_bad_rows=True)
    assert [(s.words, s.document, s.line) for s in result] == [(("Peter", "Blackburn"), 0, 3), (("OK",), 1, 12)]
    assert result.skipped == 1
    assert read_conll(path, label_list=[*CONLL2003_LABELS, "B-LOCATION"])[1].tags == ("B-LOCATION", "O")
    with pytest.raises(DataError, match="empty file"):
        read_conll(write(tmp_path / "e.txt", "\n\n"))


# --------------------------------------------------------------------------- SWAG

SWAG_HEADER = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"


def test_swag_hand_made(tmp_path: Path) -> None:
    path = write(tmp_path / "val.csv", SWAG_HEADER
                 + '0,lsmdc3001_21_JUMP_STREET-422,5,"Students lower their eyes nervously. She",'
                   'Students lower their eyes nervously.,She,gold,"pats her shoulder, then saunters off.",'
                   'turns with two students.,walks slowly towards someone.,wheels around.,0\n'
                 + '1,anetv_jkn6uvmqwh4,12,He rides the bike. He,He rides the bike.,He,gen,'
                   'stops.,falls.,"""waves"" at us.",smiles.,2\n')
    result = read_swag(path)
    assert len(result) == 2 and result.labels == ["0", "1", "2", "3"]
    first = result[0]
    assert (first.context, first.start, first.label) == ("Students lower their eyes nervously.", "She", 0)
    assert first.endings[0] == "pats her shoulder, then saunters off." and len(first.endings) == 4
    assert result[1].endings[2] == '"waves" at us.' and result[1].line == 3
    assert first.video_id == "lsmdc3001_21_JUMP_STREET-422"


def test_swag_test_file_and_bad_rows(tmp_path: Path) -> None:
    test = write(tmp_path / "test.csv", SWAG_HEADER.replace(",label", "") + "0,v,1,A b,A.,b,gen,w,x,y,z\n")
    assert read_swag(test)[0].label is None
    bad = write(tmp_path / "train.csv", SWAG_HEADER + "0,v,1,A b,A.,b,gold,w,x,y,z,4\n1,v,2,A b,A.,b,gold,w,x\n"
                + "2,v,3,A b,A.,b,gold,w,x,y,z,3\n")
    with pytest.raises(DataError, match=r"line 2, field 'label': expected an ending index 0-3, got '4'"):
        read_swag(bad)
    result = read_swag(bad, skip_bad_rows=True)
    assert [ex.label for ex in result] == [3] and result.skipped == 2
    assert result.skipped_samples[1].field == "ending2"
    with pytest.raises(DataError, match="field 'sent2'"):
        read_swag(write(tmp_path / "h.csv", "sent1,label\nA,1\n"))
    with pytest.raises(DataError, match="empty file"):
        read_swag(write(tmp_path / "e.csv", ""))


# --------------------------------------------------------------------------- registry


def test_registry_covers_every_task() -> None:
    assert set(TASKS) == {"sst2", "cola", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli", "squad",
                          "squad2", "conll2003", "swag", "classification", "regression", "ner", "qa"}
    heads = {name: spec.head for name, spec in TASKS.items()}
    assert heads["stsb"] == "regression" and heads["conll2003"] == "token_classification"
    assert heads["squad2"] == "question_answering" and heads["swag"] == "multiple_choice"
    assert heads["mnli"] == heads["classification"] == "sequence_classification"
    assert TASKS["mnli"].labels == ("contradiction", "entailment", "neutral")
    assert TASKS["rte"].labels == TASKS["qnli"].labels == ("entailment", "not_entailment")
    assert TASKS["sst2"].labels == ("0", "1") and TASKS["stsb"].num_labels == 1
    assert TASKS["conll2003"].num_labels == 9 and TASKS["squad"].num_labels is None
    assert TASKS["mnli"].dev_files == ("dev_matched.tsv", "dev_mismatched.tsv")
    assert get_task("SST-2") is TASKS["sst2"] and get_task("STS_B") is TASKS["stsb"]
    assert get_task("CoNLL-2003") is TASKS["conll2003"] and get_task("squad_v2") is TASKS["squad2"]
    with pytest.raises(KeyError, match="unknown task"):
        get_task("imdb")


def test_registry_finds_and_reads_shared_files(shared_data: Path) -> None:
    assert TASKS["sst2"].files(shared_data, "dev") == [shared_data / "glue/SST-2/dev.tsv"]
    assert TASKS["sst2"].files(shared_data / "glue", "dev") == [shared_data / "glue/SST-2/dev.tsv"]
    assert TASKS["squad"].files(shared_data, "dev") == [shared_data / "squad/dev-v1.1.json.gz"]
    (cola,) = TASKS["cola"].read(shared_data, "dev")
    assert len(cola) == 1_043
    with pytest.raises(FileNotFoundError, match="qnli train file 'train.tsv' not found"):
        TASKS["qnli"].files(shared_data, "train")
    with pytest.raises(FileNotFoundError, match="dev-v2.0.json"):
        TASKS["squad2"].files(shared_data, "dev")


def test_registry_mnli_dev_and_generic_suffixes(tmp_path: Path) -> None:
    folder = tmp_path / "glue" / "MNLI"
    folder.mkdir(parents=True)
    for name in ("dev_matched.tsv", "dev_mismatched.tsv"):
        write(folder / name, MNLI_DEV_HEADER + mnli_row(0, "A", "B", "neutral"))
    matched, mismatched = TASKS["mnli"].read(tmp_path, "dev")
    assert matched[0].guid == "dev_matched-0" and mismatched[0].guid == "dev_mismatched-0"
    write(tmp_path / "train.jsonl", '{"text": "a", "label": "x"}\n')
    assert TASKS["classification"].files(tmp_path, "train") == [tmp_path / "train.jsonl"]
    with pytest.raises(ValueError, match="split must be"):
        TASKS["sst2"].files(tmp_path, "validation")


# --------------------------------------------------------------------------- own-data helpers


def test_locate_answer_prefers_the_offset_then_the_nearest_copy() -> None:
    context = "a cat, a dog, a cat again, and far away " + "x" * 200 + " a cat"
    assert locate_answer(context, "a cat", 0) == 0
    assert locate_answer(context, "a cat", 16) == 14  # copies at 0 and 14: the nearer one
    assert locate_answer(context, "a cat", 3) == 0
    assert locate_answer(context, "a dog", 200) is None  # 193 characters away: not nearby
    assert locate_answer(context, "a cow", 0) is None and locate_answer(context, "", 0) is None
    assert locate_answer(context, "a cat", len(context) + 50) == len(context) - 5  # offset past the end


def test_ner_label_list_and_numeric_labels() -> None:
    assert ner_label_list(["O", "B-PER", "I-PER", "B-LOC"]) == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    assert ner_label_list(["S-X"]) == ["O", "B-X", "I-X", "E-X", "S-X"]
    assert numeric_labels(["1", "2", "10"]) == (True, True)
    assert numeric_labels(["1", "2.5"]) == (True, False)
    assert numeric_labels(["1", "two"]) == (False, False)
    assert numeric_labels(["1", "nan"]) == (False, False)


def test_read_ner_and_read_qa_formats(tmp_path: Path) -> None:
    conll = write(tmp_path / "train.conll", "-DOCSTART- -X- O\n\nAspirin B-DRUG\nhelps O\n")
    result = read_ner(conll)
    assert result[0].words == ("Aspirin", "helps") and result.labels == ["O", "B-DRUG", "I-DRUG"]
    with pytest.raises(DataError, match=r"expected one of \['O'\] \(the tags of t.txt\)"):
        read_ner(conll, label_list=["O"], label_source="t.txt")
    lines_as_json = write(tmp_path / "qa.json", json.dumps(
        {"question": "Who?", "context": "Ann sang.", "answers": [{"text": "Ann", "answer_start": 0}]}) + "\n")
    qa = read_qa(lines_as_json)
    assert qa[0].qid == "qa-1" and qa[0].answers[0].text == "Ann" and qa.version == "1.1"
    squad = write(tmp_path / "squad.json", json.dumps(squad_json("1.1", [
        {"id": "q", "question": "Who won?", "answers": [{"text": "Broncos", "answer_start": 4}]}])))
    assert read_qa(squad)[0].qid == "q"
    with pytest.raises(ValueError, match="SQuAD-format .json, or records: .jsonl, .parquet, .arrow"):
        read_qa(write(tmp_path / "qa.csv", "question,context\n"))


def test_generic_regression_metrics() -> None:
    """Against numpy: Pearson from corrcoef, Spearman as Pearson of ranks (no ties here), MSE by formula."""
    import numpy as np

    from bertforge.tasks.registry import regression_metrics
    preds, gold = np.array([0.1, 2.5, 3.0, 4.4, 1.0, 2.2]), np.array([0.0, 3.0, 2.8, 5.0, 1.5, 2.0])
    got = TASKS["regression"].metric(list(preds), list(gold))
    assert TASKS["regression"].metric is regression_metrics and TASKS["regression"].main_metric == "spearman"
    assert got["pearson"] == pytest.approx(np.corrcoef(preds, gold)[0, 1], abs=1e-9)
    ranks = [np.argsort(np.argsort(a)) for a in (preds, gold)]
    assert got["spearman"] == pytest.approx(np.corrcoef(*ranks)[0, 1], abs=1e-9)
    assert got["mse"] == pytest.approx(float(np.mean((gold - preds) ** 2)), abs=1e-12)


# --------------------------------------------------------------------------- label spelling, headers, labeled files


def test_label_whitespace_is_dropped_in_train_eval_and_glue(tmp_path: Path) -> None:
    """"pos " and "pos" are one class: a trailing space from a spreadsheet export must not make a third class that
    no prediction can ever match (it gave eval accuracy 0.000)."""
    train = read_classification(write(tmp_path / "train.csv", "text,label\na,pos \nb,neg\nc, pos\nd,neg\t\n"))
    assert [ex.label for ex in train] == ["pos", "neg", "pos", "neg"] and train.labels == ["neg", "pos"]
    dev = read_classification(write(tmp_path / "dev.tsv", "text\tlabel\ne\tpos  \n"), label_list=train.labels)
    assert dev[0].label == "pos"
    jsonl = read_classification(write(tmp_path / "t.jsonl", '{"text": "a", "label": "pos\\u00a0"}\n'))
    assert jsonl[0].label == "pos"  # any surrounding Unicode whitespace, not only ASCII spaces
    with pytest.raises(DataError, match=r"line 2, field 'label': expected a label name .*, got ' '"):
        read_classification(write(tmp_path / "blank.csv", "text,label\na, \n"))
    assert read_glue("sst2", write(tmp_path / "sst.tsv", "sentence\tlabel\ngood .\t1 \n"))[0].label == "1"


def test_labels_differing_only_by_case_are_refused_naming_both_spellings(tmp_path: Path) -> None:
    path = write(tmp_path / "train.csv", "text,label\na,pos\nb,neg\nc,Pos\n")
    with pytest.raises(DataError) as info:
        read_classification(path, skip_bad_rows=True)  # a file-level problem: not skipped as a bad row
    message = str(info.value)
    assert str(path) in message and "line 4, field 'label'" in message
    assert "'Pos' here and 'pos' on line 2" in message and "differ only by case" in message
    given = write(tmp_path / "dev.csv", "text,label\nd,NEG\n")
    with pytest.raises(DataError, match=r"line 2, field 'label': expected one of \['neg', 'pos'\] \(the labels of "
                                        r"train.csv\), got 'NEG', which differs only by case from 'neg'"):
        read_classification(given, label_list=["neg", "pos"], label_source="train.csv")
    assert read_classification(path, regression=False, labeled=False)[2].label is None  # unlabeled: nothing to check


def test_ner_tags_follow_the_same_spelling_rule(tmp_path: Path) -> None:
    jsonl = write(tmp_path / "t.jsonl", '{"tokens": ["Ann", "sang"], "tags": ["B-PER ", "O"]}\n')
    assert read_ner(jsonl)[0].tags == ("B-PER", "O")
    conll = write(tmp_path / "t.conll", "Ann B-PER\nsang O\n\nBob B-per\n")
    with pytest.raises(DataError, match=r"t.conll, line 4, field 'NER tag': expected one spelling per tag, got "
                                        r"'B-per' here and 'B-PER' on line 1"):
        read_ner(conll)
    dev = write(tmp_path / "dev.conll", "Ann b-PER\n")
    with pytest.raises(DataError, match=r"got 'b-PER', which differs only by case from 'B-PER'"):
        read_ner(dev, label_list=["O", "B-PER", "I-PER"])


@pytest.mark.parametrize("name, content, column", [
    ("dup.csv", "text,label,text\ngood,pos,bad\n", "text"),
    ("dup.tsv", "label\ttext\tlabel\ngood\tpos\tneg\n", "label"),
    ("dup.jsonl", '{"text": "good", "label": "pos", "label": "neg"}\n', "label"),
])
def test_a_column_named_twice_is_refused(tmp_path: Path, name: str, content: str, column: str) -> None:
    """A row read by name takes one of the two same-named columns: the file is refused, naming the column."""
    path = write(tmp_path / name, content)
    with pytest.raises(DataError) as info:
        read_classification(path)
    assert info.value.field == column and info.value.line == 1 and str(path) in str(info.value)
    assert f"{column!r} as " in str(info.value)


def test_glue_and_swag_headers_naming_a_column_twice_are_refused(tmp_path: Path) -> None:
    sst = write(tmp_path / "train.tsv", "sentence\tlabel\tsentence\ngood .\t1\tbad .\n")
    with pytest.raises(DataError, match=r"line 1, field 'sentence': expected each column name once, got 'sentence' "
                                        r"as columns 1 and 3"):
        read_glue("sst2", sst)
    header = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label,label\n"
    swag = write(tmp_path / "train.csv", header + "v,0,s,A,B,gold,e0,e1,e2,e3,0,1\n")
    with pytest.raises(DataError, match=r"field 'label': expected each column name once"):
        read_swag(swag)


def test_a_file_declared_labeled_needs_its_label_column(tmp_path: Path) -> None:
    path = write(tmp_path / "train.csv", "text\ngood\nbad\n")
    assert read_classification(path)[0].label is None  # predict reads it: no labels needed
    with pytest.raises(DataError) as info:
        read_classification(path, labeled=True)
    assert (info.value.line, info.value.field) == (1, "label") and str(path) in str(info.value)
    assert "got columns ['text']" in str(info.value)
    with pytest.raises(DataError, match=r"line 1, field 'stars': expected a label column 'stars'"):
        read_classification(write(tmp_path / "t2.csv", "text,label\ngood,pos\n"), label_column="stars", labeled=True)


def test_a_file_with_no_good_row_does_not_suggest_skipping(tmp_path: Path) -> None:
    """--skip-bad-rows would leave nothing: the message asks whether the file, task or columns are right."""
    path = write(tmp_path / "r.csv", "text,label\na,pos\nb,neg\n")
    with pytest.raises(DataError) as info:
        read_classification(path, regression=True)
    assert "no good rows in this file (2 bad)" in str(info.value) and "--skip-bad-rows" not in str(info.value)
    mixed = write(tmp_path / "m.csv", "text,label\na,0.5\nb,neg\n")
    with pytest.raises(DataError, match=r"--skip-bad-rows skips and counts them"):
        read_classification(mixed, regression=True)
    with pytest.raises(DataError, match=r"expected NER data: CoNLL columns .* got a .csv table"):
        read_ner(write(tmp_path / "ner.csv", "word,tag\nAnn,B-PER\n"))


def _columnar_copies(tmp_path: Path, columns: dict[str, list]) -> list[Path]:
    """The same table as Parquet, an Arrow IPC file and a `datasets` save_to_disk folder."""
    from record_files import record_copies
    return record_copies(tmp_path, columns, plain=True)


def test_parquet_arrow_and_datasets_read_like_csv(tmp_path: Path) -> None:
    texts, pairs, labels = ["a fine film", "dull, \"very\" dull", "so-so"], ["yes", "no", "maybe"], [1, 0, 2]
    write(tmp_path / "t.csv", "premise,hypothesis,label\n" + "".join(
        f'"{t.replace(chr(34), chr(34) * 2)}",{p},{label}\n' for t, p, label in zip(texts, pairs, labels)))
    want = read_classification(tmp_path / "t.csv", text_column="premise", text_pair_column="hypothesis")
    for path in _columnar_copies(tmp_path, {"premise": texts, "hypothesis": pairs, "label": labels}):
        got = read_classification(path, text_column="premise", text_pair_column="hypothesis")
        assert [(e.text, e.text_pair, e.label) for e in got] == [(e.text, e.text_pair, e.label) for e in want], path
        assert got.labels == want.labels == ["0", "1", "2"]
        assert [e.line for e in got] == [1, 2, 3]  # rows, numbered from 1


def test_columnar_bad_rows_and_files_name_file_row_and_field(tmp_path: Path) -> None:
    parquet, arrow, saved = _columnar_copies(tmp_path, {"text": ["good", None, "fine"], "label": ["a", "b", "a"]})
    for path in (parquet, arrow, saved):
        with pytest.raises(DataError, match=rf"{path.name}, row 2, field 'text': expected a string, got nothing"):
            read_classification(path)
        result = read_classification(path, skip_bad_rows=True)
        assert [e.text for e in result] == ["good", "fine"] and result.skipped == 1
    with pytest.raises(DataError, match=r"t.parquet, field 'sentence': expected a column named one of \['sentence'\]"):
        read_classification(parquet, text_column="sentence")
    data = parquet.read_bytes()
    broken = write(tmp_path / "broken.parquet", "")
    broken.write_bytes(data[:100] + data[-50:])
    with pytest.raises(ValueError, match=r"broken.parquet: expected a readable Parquet file, got"):
        read_classification(broken)
