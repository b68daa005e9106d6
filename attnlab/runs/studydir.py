"""The files of an ``attnlab sweep tuned`` study (written by attnlab.tasks.tuned, read by
attnlab.report.tuned): ``ROOT/tuned.json``, the trials under ``ROOT/study/<reader>/<trial>/``
and the re-run winners under ``ROOT/winners/<reader>/<job>/``."""

MANIFEST = "tuned.json"
STUDY, WINNERS = "study", "winners"
