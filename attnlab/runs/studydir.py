"""The files of an optimising sweep and of an ``attnlab sweep tuned`` study, named once.

An optimising sweep (``hydra/sweeper=optuna``) leaves ``trial.json`` in each trial's job
directory and ``trials.csv`` beside them (attnlab.tasks.trials). A ``sweep tuned`` study
(written by attnlab.tasks.tuned, read by attnlab.report.tuned_study) is ``ROOT/tuned.json``, one
such sweep per reader under ``ROOT/study/<reader>/<trial>/`` and the re-run winners under
``ROOT/winners/<reader>/<job>/``.
"""

MANIFEST = "tuned.json"
STUDY, WINNERS = "study", "winners"
TRIAL_FILE = "trial.json"  # a trial's own record, in its job directory
TRIALS_CSV = "trials.csv"  # a sweep's trials, one row each, beside its job directories
