"""kbv.model.findings: one finding per detector, and what the suffix says of the rest."""

from kbv.model.findings import finding, ordered
from kbv.model.records import Severity


def test_repeats_of_a_check_are_counted_in_words_under_the_first():
    """"(+14 more)" did not say more of what (newcomer report, eighth session)."""
    fs = [finding("probe:repeated-output", (8,), Severity.HACK, f"outputs equal on set {i}") for i in range(3)]
    fs.append(finding("scan:torch-compute", (15,), Severity.WARNING, "forward calls torch.relu()"))
    out = ordered(fs)
    assert [f.check for f in out] == ["probe:repeated-output", "scan:torch-compute"]
    assert out[0].detail == "outputs equal on set 0 (this check fired 2 more times)"
    assert out[1].detail == "forward calls torch.relu()"
