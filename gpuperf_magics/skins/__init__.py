"""The skins: thin faces over the Python API, with no behaviour a script cannot reach.

- :mod:`.magics`: ``%%profile_training`` and ``%predict_time`` (``%load_ext gpuperf_magics``);
- :mod:`.widgets` and :mod:`.panel_controls`: the ipywidgets what-if panel;
- :mod:`.plot`: the panel's curve;
- :mod:`.cli`: the ``gpuperf`` command;
- :mod:`.demo`: the quick-start demo (``gpuperf demo``).
"""
