"""The reproduction pipeline behind ``bash reproduce/all.sh``.

One module per job:

* :mod:`variants`: the learned variants (their ``metarun.py`` flags, label
  and look), one entry each;
* :mod:`names`: how a learned optimizer's name carries its training seed
  (``<variant>.t<k>``);
* :mod:`problem_list`: the test problems the reproduction meta-tests on;
* :mod:`sizes`: the sizes (tiny, quick, medium, study, pretrained, full) as
  data, and each one's row of the docs' Sizes table;
* :mod:`plan`: a size x variants x problems -> the stages, with their
  commands and the stages each needs done first, in the order they start;
* :mod:`progress`: the estimate of the time left and the progress lines;
* :mod:`runner`: runs the stages side by side (markers, resume, heartbeat,
  Ctrl-C);
* :mod:`cli`: environment and arguments, the header, the run, the summary.
"""
