"""The packaged starting point (data only): ``pretrained.pt``, a reader trained on synthetic
strips, and ``pretrained.json``, its record (the command that trained it, what it reads on
the fixed synthetic strips, its digest). ``init_from=pretrained`` and ``attnlab read IMG
--run pretrained`` name it (``attnlab.runs.pretrained``); ``scripts/pretrain.py`` makes it
again (``attnlab.maintain.packaging``), and lock-pins.toml pins its digest."""
