"""ComputeFileCostsJob refuses a frame rate beyond any features' (1e300) when the graph is built."""

import pytest

from tests.jobs.conftest import SISYPHUS_REASON

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)

from i6_shard.jobs import ComputeFileCostsJob  # noqa: E402


@pytest.mark.parametrize("rate", [1e300, 10**7, float("nan")])
def test_a_frame_rate_beyond_any_features_is_refused_when_the_graph_is_built(work_dir, rate):
    with pytest.raises(ValueError, match=r"\(--frame-rate\) is not a rate of frames per second in \(0, 1,000,000\]"):
        ComputeFileCostsJob(["/abs/a.zip"], unit="frames", frame_rate=rate)
