"""Value equality of a candidate's outputs with the reference's (``kbv.reference.comparison``)."""



def test_equals_reference_is_value_equality_of_every_output():
    import torch

    from kbv.reference.comparison import equals_reference

    r = [torch.tensor([1.0, -0.0, 3.0]), torch.tensor([1, 2])]
    assert equals_reference([t.clone() for t in r], r)
    assert equals_reference([torch.tensor([1.0, 0.0, 3.0]), r[1].clone()], r)  # -0.0 equals 0.0
    assert not equals_reference([r[0].clone()], r)  # an output missing
    assert not equals_reference([torch.tensor([1.0, 0.0, 3.0000002]), r[1].clone()], r)
    assert not equals_reference([r[0].double(), r[1].clone()], r)  # another dtype
    assert not equals_reference([r[0].reshape(3, 1), r[1].clone()], r)  # another shape
    nan = [torch.tensor([float("nan")])]
    assert not equals_reference(nan, nan)  # NaN equals nothing
