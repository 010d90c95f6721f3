"""kbv.reference.build.same_bits_under: whether eager-tf32's flags change the reference's bits on
cpu (then both baselines are timed; else eager-tf32 is eager-fp32's times). Decided by the outputs
alone, whatever the machine's CPU: the models here read the flag themselves."""

from types import SimpleNamespace

import torch

from kbv.reference.build import same_bits_under
from kbv.sandbox import numeric_flags as bl


class _ByPrecision(torch.nn.Module):
    """Adds 1 where torch's float32 matmul precision is not "highest": the flag changes its bits."""

    def forward(self, x):
        return x + (0.0 if torch.get_float32_matmul_precision() == "highest" else 1.0)


class _Raises(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("no")


def _rp(model):
    return SimpleNamespace(model=model, device=torch.device("cpu"), mutation_checked=True, aliases_inputs=False,
                           zero_strides=False, mutates_inputs=False, output_bytes=0)


def test_same_bits_under_both_flag_sets_only_where_the_outputs_agree():
    fp32, tf32 = bl.flags_for("eager-fp32"), bl.flags_for("eager-tf32")
    x = [torch.randn(8, 4)]
    assert same_bits_under(_rp(torch.nn.ReLU()), x, fp32, tf32) is True
    assert same_bits_under(_rp(_ByPrecision()), x, fp32, tf32) is False
    assert same_bits_under(_rp(_Raises()), x, fp32, tf32) is False
    assert torch.get_float32_matmul_precision() == "highest"  # the first flags are back on
