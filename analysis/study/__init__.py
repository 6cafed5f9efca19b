"""The similarity-matrix study: corpus sampling, streaming per-head statistics, report, head selection.

Built on the base layer (:mod:`headseg.analysis`): ``corpus`` reads and plans
windows, ``stats`` holds the fixed-size accumulators, ``report`` writes the
report, figures and head profile, ``runner`` drives a resumable run.
"""

from .runner import Study, StudyConfig, run_study

__all__ = ["Study", "StudyConfig", "run_study"]
