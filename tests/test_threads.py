"""`--threads auto`: the count follows the cores other processes leave free, and never changes
what a run computes."""

import subprocess
import sys
import time

import pytest
import torch

from trainer.cli import threads_arg
from trainer.config import make_config
from trainer.data.corpus import load_corpus
from trainer.loop import threads
from trainer.loop.run import Trainer, setup_torch
from transitsim.base.errors import TransitsimError


def test_auto_is_zero_and_a_count_must_be_positive() -> None:
    assert threads_arg("auto") == 0 and threads_arg("AUTO") == 0 and threads_arg("3") == 3
    for bad in ("0", "-1", "two", ""):
        with pytest.raises(Exception, match="thread"):
            threads_arg(bad)
    with pytest.raises(TransitsimError, match="threads"):
        make_config("shakespeare-mini", "A", threads=-1)
    assert make_config("shakespeare-mini", "A", threads=0).threads == 0


def test_a_busy_process_is_seen_at_once() -> None:
    """A spinning process is one more runnable thread: auto gives it its core."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        assert threads.others_running() >= 1
        assert threads.free_cores() <= max(1, threads.cores() - 1)
    finally:
        spinner.kill()
        spinner.wait()


def test_the_governor_steps_down_at_once_and_up_slowly(monkeypatch) -> None:
    free = iter([2, 1, 2, 2, 2, 2, 1])
    monkeypatch.setattr(threads, "free_cores", lambda limit=None: next(free))
    previous = torch.get_num_threads()
    try:
        governor = threads.ThreadGovernor()
        assert governor.threads == 2
        every = threads.CHECK_EVERY
        for look in range(1, 7):
            governor.before_step(look * every - 1)  # not a checking step: nothing read
            governor.before_step(look * every)
        # looks: 1 -> down to 1; 2, 2 -> still 1; the third 2 in a row -> 2; then 2, 1 -> 1
        assert governor.history == [2, 1, 1, 1, 2, 2, 1]
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(previous)


@pytest.mark.parametrize("variant", ["A", "B"])
def test_losses_do_not_depend_on_the_thread_count(variant: str) -> None:
    """Why auto may change the count mid-run: a resumed run still equals an uninterrupted one."""
    previous = torch.get_num_threads()
    losses = []
    try:
        for count in (1, 2):
            setup_torch(count)
            settings = dict(dataset="shakespeare", block=32, eval_every=10**9, workers=2)
            cfg = make_config("synthetic", variant, steps=4, threads=count, **settings)
            trainer = Trainer(cfg, load_corpus(cfg.dataset, cfg.tokenizer, cfg.vocab_size))
            losses.append([trainer.step()["train_loss"] for _ in range(3)])
    finally:
        torch.set_num_threads(previous)
    assert losses[0] == losses[1]
