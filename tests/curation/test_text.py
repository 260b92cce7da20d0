"""Text filters: normalisation, MinHash groups (verbatim, near, Chinese, reference), stored signatures, language."""

import json
import random

import numpy as np
import pytest

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.core.texts import normalise, shingles
from benchcurate.curation.text import minhash
from benchcurate.curation.text.language import detect, language_group
from benchcurate.curation.text.minhash import MinHashParams, near_duplicate_groups, signatures
from tests.helpers import curate_in_process

BASE = "Which of the two bars in this chart grew faster between 2019 and 2021, and by how much?"


def dropped_pairs(texts, threshold=0.8, reference=()):
    groups, _ = near_duplicate_groups(texts, MinHashParams(threshold=threshold), None, reference)
    return {(group.kept, index) for group in groups for index, _ in group.members}


def test_normalisation_makes_spacing_case_and_width_copies_equal():
    assert normalise("  Ｈｏｗ   MANY\tcats?\n") == normalise("how many cats?") == "how many cats?"
    assert shingles("Hi") == {"hi"} and shingles("") == set()
    assert shingles("图表里有几只猫") == {*"图表里有几只猫", "图表", "表里", "里有", "有几", "几只", "只猫"}
    assert shingles("Which bar, which line?") == {"which", "bar", "line", "which bar", "bar which", "which line"}


def _agreement(first: np.ndarray, second: np.ndarray) -> float:
    return float((first == second).mean())


def test_the_share_of_equal_signature_values_estimates_the_jaccard_of_the_shingle_sets():
    """Against the exact Jaccard of `shingles` (what the decision reads), over 300 edited copies."""
    rng = random.Random(3)
    words = [f"word{k}" for k in range(400)]
    params = MinHashParams()
    errors, equal_sets = [], []
    for _ in range(300):
        text = " ".join(rng.choices(words, k=rng.randint(8, 30)))
        edited = text.split()
        for _ in range(rng.randint(0, 6)):
            edited[rng.randrange(len(edited))] = rng.choice(words)
        other = " ".join(edited)
        matrix, _ = signatures([text, other], params, None)
        exact = minhash.jaccard(params.shingles(text), params.shingles(other))
        errors.append(_agreement(matrix[0], matrix[1]) - exact)
        if exact == 1.0:
            equal_sets.append(_agreement(matrix[0], matrix[1]))
    assert abs(np.mean(errors)) < 0.01 and np.std(errors) < 0.05  # 128 values: sd about 0.03 near 0.8
    assert equal_sets and set(equal_sets) == {1.0}  # equal shingle sets, equal signatures


@pytest.mark.parametrize("num_perm", [64, 128])
def test_a_text_has_the_same_signature_in_any_batch(num_perm):
    """Blocks of many texts (more than SHINGLE_BLOCK units in all), accents, Chinese, an empty text: a text's
    row does not depend on its neighbours, so stored signatures stay valid."""
    rng = random.Random(num_perm)
    words = ["what", "colour", "is", "the", "café", "naïve", "图片", "里", "有", "什么", "3.5", "x", "¿por", "qué?"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 40))) for _ in range(400)] + ["", "?!"]
    params = MinHashParams(num_perm=num_perm)
    assert sum(len(text.split()) for text in texts) > minhash.SHINGLE_BLOCK
    together, computed = signatures(texts, params, None)
    assert computed == len(set(map(normalise, texts))) and together.shape == (len(texts), num_perm)
    for index in rng.sample(range(len(texts)), 25) + [len(texts) - 2, len(texts) - 1]:
        alone, _ = signatures([texts[index]], params, None)
        assert np.array_equal(alone[0], together[index]), texts[index]
    assert (together[-1] == 2**32 - 1).all() and (together[-2] == 2**32 - 1).all()  # no shingles
    assert len({row.tobytes() for row in together}) > 0.9 * len(set(map(normalise, texts)))


def _datasketch_signature(text: str, params: MinHashParams):
    from datasketch import MinHash

    signature = MinHash(num_perm=params.num_perm, seed=1)
    for shingle in params.shingles(text):
        signature.update(shingle.encode("utf-8"))
    return signature


@pytest.mark.parametrize("num_perm", [64, 128])
def test_signatures_are_datasketchs_value_for_value(num_perm):
    """The bulk path equals datasketch's MinHash(num_perm, seed=1) updated shingle by shingle: English, accents,
    Chinese, one word, no shingles at all, in one batch larger than a block."""
    rng = random.Random(7)
    words = ["what", "colour", "is", "the", "café", "naïve", "图片", "里", "有", "什么", "3.5", "x", "¿por", "qué?"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    texts += ["", "?!", "Hi", "这张图表中哪一部分的数值最大？", BASE]
    params = MinHashParams(num_perm=num_perm)
    matrix, _ = signatures(texts, params, None)
    for text, row in zip(texts, matrix, strict=True):
        assert np.array_equal(_datasketch_signature(text, params).hashvalues, row), text


def test_a_stored_signature_loads_as_a_lean_minhash_and_a_users_lsh_query_finds_our_pairs(tmp_path):
    from datasketch import LeanMinHash

    store = Cache(tmp_path / "cache.sqlite")
    texts = [
        BASE,
        BASE.replace("by how much", "by how much exactly"),
        "What does the sign on the left door say?",
        "Count the birds on the wire.",
        "count the birds on the wires.",
    ]
    params = MinHashParams(threshold=0.6)
    matrix, _ = signatures(texts, params, store)
    stored = store.get_bytes_many(minhash.NAMESPACE, [minhash.signature_key(normalise(text), params) for text in texts])
    assert len(stored) == len(texts)
    for raw in stored.values():
        lean = LeanMinHash.deserialize(raw)
        assert lean.seed == 1 and len(lean) == params.num_perm
        assert any(np.array_equal(lean.hashvalues, row) for row in matrix)
    index = minhash.lsh_index([f"t{k}" for k in range(len(texts))], matrix, params)
    found = {
        (f"t{k}", other)
        for k, text in enumerate(texts)
        for other in index.query(_datasketch_signature(text, params))
        if other != f"t{k}"
    }
    bands, rows = params.bands()
    ours = minhash.candidate_pairs(matrix, bands, rows)
    assert found == {(f"t{i}", f"t{j}") for i, j in ours} | {(f"t{j}", f"t{i}") for i, j in ours}
    assert ("t0", "t1") in found and ("t3", "t4") in found


def test_verbatim_and_near_copies_group_and_different_texts_stay_apart():
    texts = [
        BASE,
        "  which of the two BARS in this chart grew faster between 2019 and 2021, and by how much? ",  # verbatim
        BASE.replace("by how much", "by how much exactly"),  # near
        "What does the sign on the left door say?",
        "What does the sign on the right door say?",
    ]
    pairs = dropped_pairs(texts)
    assert pairs == {(0, 1), (0, 2)}  # the two door questions differ in one word of nine: 0.7, below 0.8


def test_verbatim_copies_group_even_at_the_strictest_threshold():
    assert dropped_pairs(["Count the cats.", "count   the CATS.", "Count the dogs."], threshold=1.0) == {(0, 1)}


def test_chinese_near_copies_are_found_by_character_shingles():
    texts = ["这张图表中哪一部分的数值最大？", "这张图表中哪一部分的数值最大呢？", "图片里的人在做什么？"]
    assert dropped_pairs(texts) == {(0, 1)}


def test_a_reference_text_is_kept_over_ours():
    groups, _ = near_duplicate_groups(
        ["Describe the painting!", "Something else"], MinHashParams(), None, reference=["describe the painting."]
    )
    assert len(groups) == 1 and groups[0].kept is None and groups[0].reference == 0
    assert groups[0].members == [(0, 1.0)]


def test_stored_signatures_are_reused_and_a_threshold_change_computes_none(tmp_path):
    store = Cache(tmp_path / "cache.sqlite")
    texts = [f"question number {k} about the picture" for k in range(50)]
    _, first = near_duplicate_groups(texts, MinHashParams(threshold=0.7), store)
    _, again = near_duplicate_groups(texts + ["a new question"], MinHashParams(threshold=0.5), store)
    assert first["signatures_computed"] == 50 and again["signatures_computed"] == 1
    _, other = near_duplicate_groups(texts, MinHashParams(num_perm=64), store)
    assert other["signatures_computed"] == 50  # other parameters, other signatures


@pytest.mark.parametrize(
    "text,code",
    [
        ("How many cats are in the picture?", "en"),
        ("¿Cuántos gatos hay en la foto?", "es"),
        ("Wie viele Katzen siehst du auf dem Bild?", "de"),
        ("图里有几只猫？", "zh"),
        ("写真に猫は何匹いますか", "ja"),
        ("사진에 고양이가 몇 마리 있나요?", "ko"),
        ("数一数鸟。", "zh"),
        ("鳥を数えて。", "ja"),
        ("Hi!", "unknown"),
        ("12345 ?!", "unknown"),
        ("猫", "unknown"),
    ],
)
def test_languages_are_iso_codes_and_short_texts_are_unknown(text, code):
    assert detect(text)[0] == code
    assert detect(text) == detect(text)  # seeded


def test_probench_groups():
    assert [language_group(code) for code in ("en", "pt", "fr", "es", "de", "zh", "unknown")] == [
        "en",
        "pt",
        "fr",
        "es",
        "de",
        "other",
        "other",
    ]


def test_text_commands_on_any_jsonl(tmp_path):
    rows = [
        {"id": "a", "question": BASE},
        {"id": "b", "question": BASE.upper()},
        {"question": "What colour is the car?"},
        {"id": "d", "question": "Qual é a cor do carro na foto?"},
    ]
    source = tmp_path / "q.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    dups = curate_in_process(["text", "dups", str(source), "--out", str(tmp_path / "groups.jsonl")], tmp_path)
    assert dups.returncode == 0, dups.stderr
    assert [json.loads(line) for line in (tmp_path / "groups.jsonl").read_text().splitlines()] == [
        {"kept": "a", "dropped": [{"id": "b", "jaccard": 1.0}]}
    ]
    lang = curate_in_process(["text", "lang", str(source), "--out", str(tmp_path / "lang.jsonl")], tmp_path)
    assert lang.returncode == 0, lang.stderr
    coded = [json.loads(line) for line in (tmp_path / "lang.jsonl").read_text().splitlines()]
    assert [row["language"] for row in coded] == ["en", "en", "en", "pt"] and coded[2]["question"]
    missing = curate_in_process(
        ["text", "dups", str(source), "--field", "prompt", "--out", str(tmp_path / "g.jsonl")], tmp_path
    )
    assert missing.returncode == 2 and "has no field 'prompt'" in missing.stderr


def test_short_and_stop_word_queries_are_dropped_with_their_counts(tmp_path):
    from benchcurate.curation.core.cache import Cache
    from benchcurate.curation.engine.stage import StageContext
    from benchcurate.curation.models.offline import OfflineBackend
    from benchcurate.curation.text import query_filter
    from benchcurate.schemas import Drop, Keep, Turn
    from tests.factories import make_sample

    ctx = StageContext(
        run_dir=tmp_path, stage="query_filter", run_seed=0, backend=OfflineBackend(), cache=Cache(tmp_path / "c.sqlite")
    )
    cfg = query_filter.QueryFilterConfig()

    def verdict(text, language=None):
        item = make_sample(1, language=language, conversation=[Turn(speaker="user", utterance=text)])
        return query_filter.decide(query_filter.score(item, cfg, ctx), cfg)

    assert verdict("hi").reason == "query_too_short"
    assert verdict("what is this?").reason == "query_mostly_stop_words"
    assert verdict("What breed is this dog, and how old might it be?") == Keep()
    assert verdict("这是什么？", "zh").reason == "query_mostly_stop_words"
    assert verdict("图中的猫是什么品种？", "zh") == Keep()
    lenient = query_filter.QueryFilterConfig(max_stopword_ratio=1.0)
    item = make_sample(2, conversation=[Turn(speaker="user", utterance="what is this?")])
    stored = query_filter.score(item, cfg, ctx)
    assert isinstance(query_filter.decide(stored, cfg), Drop) and query_filter.decide(stored, lenient) == Keep()


WORDS = [
    "chart",
    "bar",
    "line",
    "axis",
    "value",
    "year",
    "month",
    "total",
    "share",
    "sales",
    "growth",
    "region",
    "product",
    "price",
    "cost",
    "market",
    "team",
    "image",
    "photo",
    "table",
    "column",
    "row",
    "label",
    "legend",
    "title",
    "figure",
    "number",
    "percent",
    "average",
    "highest",
    "lowest",
    "compare",
    "between",
    "during",
    "since",
    "after",
    "before",
    "which",
    "what",
    "where",
    "when",
    "how",
    "many",
    "much",
    "does",
    "show",
    "explain",
    "describe",
    "city",
    "river",
    "building",
    "person",
    "car",
    "tree",
    "sign",
    "screen",
    "button",
    "menu",
    "page",
    "document",
    "receipt",
    "invoice",
]


def questions(count: int, seed: int) -> list[str]:
    """Distinct questions of 20 to 25 words drawn from one vocabulary (so unrelated ones share many words)."""
    import random

    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 25))) + "?" for _ in range(count)]


def one_word_changed(text: str, seed: int) -> str:
    import random

    rng = random.Random(seed)
    words = text.rstrip("?").split()
    position = rng.randrange(len(words))
    words[position] = rng.choice(
        [word for word in ("zebra", "violin", "harbor", "quartz", "meadow", "glacier") if word not in words]
    )
    return " ".join(words) + "?"


@pytest.mark.parametrize("threshold", [0.8, None])
def test_a_copy_with_one_word_changed_in_twenty_five_is_found_and_unrelated_questions_are_not(threshold):
    originals = questions(300, seed=1)
    copies = [one_word_changed(text, seed) for seed, text in enumerate(originals)]
    params = MinHashParams() if threshold is None else MinHashParams(threshold=threshold)
    groups, _ = near_duplicate_groups(originals + copies, params, None)
    found = {(group.kept, index) for group in groups for index, _ in group.members}
    recall = sum((k, k + 300) in found for k in range(300)) / 300
    assert recall >= 0.9, recall
    assert all(index - kept == 300 for kept, index in found)  # no unrelated question merged
    verbatim = originals + [text.upper() for text in originals[:50]]
    groups, _ = near_duplicate_groups(verbatim, params, None)
    assert {(group.kept, index) for group in groups for index, _ in group.members} == {(k, k + 300) for k in range(50)}


def test_one_prompt_over_many_images_is_many_items_and_copies_about_one_image_are_one():
    texts = ["What is funny about this picture?"] * 5 + ["What is funny about this picture??", "Describe it."]
    scopes = ["img-a", "img-b", "img-c", "img-d", "img-e", "img-a", "img-a"]
    groups, _ = near_duplicate_groups(texts, MinHashParams(), None, scopes=scopes)
    assert [(group.kept, [index for index, _ in group.members]) for group in groups] == [(0, [5])]
    groups, _ = near_duplicate_groups(texts, MinHashParams(), None)  # prompt only: every copy goes
    assert [(group.kept, sorted(index for index, _ in group.members)) for group in groups] == [(0, [1, 2, 3, 4, 5])]


def test_text_dups_groups_by_a_field_when_asked(tmp_path):
    rows = [{"id": f"q{k}", "prompt": "为什么这张图片有趣？", "image_path": f"images/{k % 3}.jpg"} for k in range(6)]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    per_image = curate_in_process(
        ["text", "dups", str(path), "--field", "prompt", "--group-by", "image_path", "--out", str(tmp_path / "a.jsonl")]
    )
    assert per_image.returncode == 0 and "6 texts, 3 groups, 3 near copies" in per_image.stdout
    prompt_only = curate_in_process(
        ["text", "dups", str(path), "--field", "prompt", "--out", str(tmp_path / "b.jsonl")]
    )
    assert "6 texts, 1 groups, 5 near copies" in prompt_only.stdout
