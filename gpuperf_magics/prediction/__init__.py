"""The what-if layer: a store's runs in, answers for other configurations out.

Above the model (which learns from tables) and the capture (which measures), below the skins
(magics, panel, CLI), which only parse, call these and show what they return:

- :mod:`.store_model`: fit the store's model (:func:`~.store_model.fit_store`);
- :mod:`.job`: the :class:`~.job.Job` every answer takes (and how messages name its fields);
- :mod:`.options`: the options of a job, declared once for the magic and the CLI;
- :mod:`.predict`: :func:`~.predict.predict_time`;
- :mod:`.record`: its answer, the :class:`~.record.Prediction`;
- :mod:`.display`: how a prediction is shown (text and HTML; the panel's too);
- :mod:`.offers`: the same job on rentable offers, with cost and deadline;
- :mod:`.remaining`: the time left of a run that stopped early;
- :mod:`.live`: the rule that blends a young run with the model, and the live line's prior;
- :mod:`.memory`: whether a batch fits in another GPU's memory.

The layer's public names are those of the package root (``gm.Job``, ``gm.predict_time``,
``gm.offers``, ``gm.remaining_time``, ``gm.live_prior``...).
"""
