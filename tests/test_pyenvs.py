"""tests/support/pyenvs.py: the tests' PyPI environments skip only when the package index cannot be reached."""

from __future__ import annotations

import pytest

from support.pyenvs import index_reachable, python_env


@pytest.mark.network
def test_a_pin_the_index_does_not_have_is_an_error_not_a_skip() -> None:
    if not index_reachable():
        pytest.skip("the package index cannot be reached: a misspelled pin cannot be told from no network")
    with pytest.raises(RuntimeError, match="onnxruntime-no-such-package==1.30.0"):
        python_env("misspelled", ["onnxruntime-no-such-package==1.30.0"])
