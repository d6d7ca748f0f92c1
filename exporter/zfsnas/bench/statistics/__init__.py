"""What several jobs share: how sure an answer is, and how to sample a corpus without reading it all.

- intervals.py: Student's t, intervals and decisions in log space: the race's state (running/'s
  racing.py), how sure a pick is (answering/'s recommend.py) and predict's interval;
- sampling.py: a corpus walked without holding it, cut into strata and windows, sampled with a
  replayable key (predicting/'s sample, the racing copy's stratified order).

Pure numbers and a walk of names and sizes; imports nothing of the bench wing or the store.
"""
