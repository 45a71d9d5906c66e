"""The what-if layer: a store's runs in, answers for other configurations out.

Above the model (which learns from tables) and the capture (which measures), below the skins
(magics, panel, CLI), which only parse, call these and show what they return:

- :mod:`.store_model`: fit the store's model (:func:`~.store_model.fit_store`);
- :mod:`.options`: the options of a job, declared once for the magic and the CLI;
- :mod:`.predict`: :func:`~.predict.predict_time` and its :class:`~.predict.Prediction`;
- :mod:`.offers`: the same job on rentable offers, with cost and deadline;
- :mod:`.remaining`: the time left of a run that stopped early;
- :mod:`.memory`: whether a batch fits in another GPU's memory;
- :mod:`.display`: how a prediction is shown (text and HTML).
"""
