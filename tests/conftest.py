import os
import shutil
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from families import FAMILY_CASES  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """`compile` tests need the C++ compiler torch.compile's CPU backend builds its kernels with."""
    if shutil.which(os.environ.get("CXX", "g++")):  # the compiler Inductor looks for on Linux
        return
    skip = pytest.mark.skip(reason="torch.compile on CPU needs a C++ compiler: g++, or the one $CXX names")
    for item in items:
        if item.get_closest_marker("compile"):
            item.add_marker(skip)


@pytest.fixture(params=FAMILY_CASES, ids=lambda case: case.name)
def family(request):
    return request.param


@pytest.fixture(scope="session")
def ddp(tmp_path_factory):
    """`ddp.run(name, tmp_path, overrides)`: a family's DDP steps on 2 processes (`ddp_train.launch`), every job of
    `ddp_train.SHARED_JOBS` from one launch."""
    from ddp_train import SharedLaunch

    return SharedLaunch(tmp_path_factory.mktemp("ddp"))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def random_batch(vocab_size, lengths, pad_token_id=0, seed=0, left_padding=False):
    """input_ids/attention_mask for documents of the given lengths, padded to the longest."""
    generator = torch.Generator().manual_seed(seed)
    n = max(lengths)
    input_ids = torch.full((len(lengths), n), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(lengths), n), dtype=torch.long)
    for row, length in enumerate(lengths):
        ids = torch.randint(1, vocab_size, (length,), generator=generator)
        span = slice(n - length, n) if left_padding else slice(0, length)
        input_ids[row, span] = ids
        attention_mask[row, span] = 1
    return input_ids, attention_mask
