"""The similarity-matrix study: corpus sampling, streaming per-head statistics, report, head selection.

``headseg study`` runs it; its output, ``heads.json``, is the head profile
(:mod:`headseg.analysis.profile`) that segmentation and export read.  Built on
the base layer (:mod:`headseg.analysis`): ``corpus`` reads the corpus and plans
the windows, ``stats`` holds the fixed-size accumulators, ``report`` writes the
report, figures and head profile, ``runner`` drives a resumable run, and
``distributed`` shards a run over Ray tasks (the ``ray`` extra; imported only
when asked for).
"""

from .runner import Study, StudyConfig, run_study

__all__ = ["Study", "StudyConfig", "run_study"]
