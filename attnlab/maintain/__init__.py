"""Tools for whoever maintains attnlab, not for its users: the lab handout's figures
regenerated from real runs (``labcommands`` runs them, ``labfigures`` computes them) and
kept between its markers (``labdoc``), and the packaged reader made and checked
(``packaging``). ``scripts/lab_figures.py`` and ``scripts/pretrain.py`` run them; nothing a
user runs (the CLI, ``attnlab.load``) imports them: this layer stands above every other."""
