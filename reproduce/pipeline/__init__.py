"""The reproduction pipeline behind ``bash reproduce/all.sh``.

One module per job:

* :mod:`variants`: the learned variants (their ``metarun.py`` flags, label
  and look), one entry each;
* :mod:`problem_list`: the test problems the reproduction meta-tests on;
* :mod:`sizes`: the sizes (tiny, quick, medium, pretrained, full) as data;
* :mod:`plan`: a size x variants x problems -> the stages, with their
  commands, in the order they run;
* :mod:`progress`: the estimate of the time left and the progress lines;
* :mod:`runner`: runs the stages side by side (markers, resume, heartbeat,
  Ctrl-C);
* :mod:`cli`: environment and arguments, the header, the run, the summary.
"""
