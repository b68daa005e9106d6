"""The packaged starting points (data only), one per height: ``pretrained-H.pt``, a reader
trained on synthetic strips read at H px, and ``pretrained-H.json``, its record (the command
that trained it, what it reads on the fixed synthetic strips, its digest).
``init_from=pretrained`` takes the one nearest the strips' height and ``attnlab read IMG
--run pretrained-64`` names one (``attnlab.runs.pretrained``); ``scripts/pretrain.py
--height H`` makes one again (``attnlab.maintain.packaging``), and lock-pins.toml pins each
digest."""
