"""The tune wing: one tune of one key, from the call to its outcome.

``tuning`` runs a tune: ``plan`` says which candidates, ``measure`` measures one, the sampling
policies (``adaptive``, ``fixed``, ``sampling``) decide how many samples, ``ranking`` names the
winner, ``checks`` and ``verify`` hold every candidate to the right answer, ``pipelines`` keeps
what was compiled, ``runner`` drives the coroutine, ``events`` and ``log`` report it.
"""
