

def test_a_status_prints_as_itself():
    # newcomer helper (eighteenth session): print(kbv.verify(...).status) gave "Status.INCORRECT"
    from kbv.model.base import Status

    assert str(Status.INCORRECT) == "INCORRECT" and f"{Status.PASS}" == "PASS" and Status.PASS == "PASS"
