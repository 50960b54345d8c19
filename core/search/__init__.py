"""The search wing: which candidates of a large parameter space a tune measures.

``strategies`` holds the strategies and the :class:`~wgtune.search.strategies.Search` a set
carries; ``surrogate`` the model the model-based strategy predicts from. Pure: no device, no
tune; the driver that measures what a strategy proposes is the tune wing's.
"""
