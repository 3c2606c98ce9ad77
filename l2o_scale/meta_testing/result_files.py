"""The result files of ``metatest.py``: their names, the model names that
make them, the record of what a run wrote, and how problems are named.

``metatest.py`` writes them and ``python -m l2o_scale.results`` reads them
back; both take the names from here. The names are the original's
(Evaluation ``metatest.py`` l.396-400:
``seed<S>_eval_loss_record.pickle-<model_name>``), with ``-problem<k>``
appended when one run tests several problems. Beside them each run writes
``metatest_record-<model_name>.json``: the model name and the problems in
the order of their ``-problem<k>`` index, each with its label, so the files
read back without guessing where the model name ends.

No TensorFlow import: the results command reads files only.
"""

import re

from problems import registry

LOSS_FILE = "seed{seed}_eval_loss_record.pickle-{model_name}"
HELDOUT_FILE = "seed{seed}_heldout_record-{model_name}.json"
RESULT_PATTERNS = (LOSS_FILE, HELDOUT_FILE)
RUN_RECORD = "metatest_record-{model_name}.json"
PROBLEM_SUFFIX = "-problem{index}"

# Long enough for any descriptive name, short enough that the longest file
# name (held-out record, seed and problem suffix) stays under 255 bytes.
MAX_MODEL_NAME = 150
_MODEL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._+=,@-]*$")
_ENDS_IN_PROBLEM = re.compile(r"-problem\d+$")


def model_name_problem(model_name):
  """The error line for a ``--model_name`` that would make unsafe or
  ambiguous file names, or None. Empty names, path separators, spaces and
  a leading dot or dash are refused, and so are names that end in
  ``-problem<digits>`` (the files of a run of several problems end so) or
  in ``.tmp`` (a partly written file's temporary name ends so)."""
  if not model_name:
    return ("--model_name is empty: it names the result files "
            "(seed<S>_eval_loss_record.pickle-<model_name>); give a name, "
            "e.g. --model_name=adam")
  if len(model_name) > MAX_MODEL_NAME:
    return "--model_name is {} characters long; give at most {}".format(
        len(model_name), MAX_MODEL_NAME)
  if not _MODEL_NAME.match(model_name):
    return ("--model_name={!r} is not a safe file name suffix: use letters, "
            "digits and . _ - + = , @ (starting with a letter, digit or "
            "_)".format(model_name))
  if model_name.endswith(".tmp"):
    return ("--model_name={} ends in .tmp, the ending of a partly written "
            "file; give another name".format(model_name))
  if _ENDS_IN_PROBLEM.search(model_name):
    return ("--model_name={} ends like the -problem<k> suffix of a run of "
            "several problems, so its files would read back as another "
            "model's; give another name, e.g. {}".format(
                model_name, _ENDS_IN_PROBLEM.sub(
                    lambda m: m.group(0).replace("-problem", "-p"),
                    model_name)))
  return None


def result_name(pattern, seed, model_name, problem_index, num_problems):
  """The file name of ``pattern`` (:data:`LOSS_FILE` or
  :data:`HELDOUT_FILE`) for one seed and problem: when the run tests
  several problems, ``-problem<k>`` follows the model name (the loss
  file's name ends there, as the original's; the held-out record keeps
  its ``.json``)."""
  if num_problems > 1:
    model_name += PROBLEM_SUFFIX.format(index=problem_index)
  return pattern.format(seed=seed, model_name=model_name)


def _text(value):
  """A value as it reads in a problem's description: functions and
  classes by name."""
  if callable(value) and hasattr(value, "__name__"):
    return value.__name__
  return repr(value)


def spec_text(spec):
  """A problem ``Spec`` as a call: ``FullyConnected(784, 10,
  hidden_sizes=(20,), activation=sigmoid)``."""
  parts = [_text(a) for a in spec.args] + [
      "{}={}".format(k, _text(v)) for k, v in spec.kwargs.items()]
  return "{}({})".format(_text(spec.callable), ", ".join(parts))


def problem_label(flag_name, spec, index_in_set=0, set_size=1):
  """The name of a tested problem in output, tables and figures: the
  registry's label of a test problem (``MNIST MLP 784-20-10, sigmoid``),
  else the problem as a call; ``#i of n`` for one of a set of several."""
  entry = registry.by_flag().get(flag_name)
  label = entry.label if entry is not None else spec_text(spec)
  if set_size > 1:
    label += " (#{} of {})".format(index_in_set + 1, set_size)
  return label


def run_record(model_name, test_optimizer, problems):
  """The JSON record of a run: ``problems`` is ``[(flag, label)]`` in the
  order of the ``-problem<k>`` index."""
  return {
      "model_name": model_name,
      "test_optimizer": test_optimizer,
      "problem_suffix": len(problems) > 1,
      "problems": [{"index": k, "flag": flag_name, "label": label}
                   for k, (flag_name, label) in enumerate(problems)],
  }
