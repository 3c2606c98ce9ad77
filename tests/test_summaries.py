"""A resumed run's summaries replace the killed run's, as TensorBoard reads
them (its own event loader is the truth here)."""

import time

import tensorflow as tf
from tensorboard.backend.event_processing import plugin_event_accumulator

from l2o_scale.runs import summaries


def _scalars(logdir, tag="MetaObjective"):
  # The accumulator TensorBoard loads TF2 summaries with (tensors).
  acc = plugin_event_accumulator.EventAccumulator(
      str(logdir), size_guidance={plugin_event_accumulator.TENSORS: 0})
  acc.Reload()
  return [(e.step, float(tf.make_ndarray(e.tensor_proto)))
          for e in acc.Tensors(tag)]


def _write(writer, steps, value):
  with writer.as_default():
    for step in steps:
      tf.summary.scalar("MetaObjective", value, step=step)
  writer.flush()


def test_resumed_run_has_one_value_per_step(tmp_path):
  # The first run checkpoints after 3 meta-updates, writes steps 1-5 and is
  # killed; the resumed run restores the checkpoint and writes 4-6 again.
  first = summaries.create_writer(str(tmp_path))
  _write(first, range(1, 6), 1.0)
  first.close()
  time.sleep(1.1)  # A resumed process starts later than the killed one.
  second = summaries.create_writer(str(tmp_path), resumed_from_step=3)
  _write(second, range(4, 7), 2.0)
  second.close()
  assert _scalars(tmp_path) == [(1, 1.0), (2, 1.0), (3, 1.0), (4, 2.0),
                                (5, 2.0), (6, 2.0)]
  # Killed again after step 6, resumed from the checkpoint at step 5.
  time.sleep(1.1)
  third = summaries.create_writer(str(tmp_path), resumed_from_step=5)
  _write(third, range(6, 8), 3.0)
  third.close()
  assert _scalars(tmp_path) == [(1, 1.0), (2, 1.0), (3, 1.0), (4, 2.0),
                                (5, 2.0), (6, 3.0), (7, 3.0)]


def test_resuming_a_run_without_start_marker(tmp_path):
  """A run begun before markers existed: the resume adds the initial START."""
  first = tf.summary.create_file_writer(str(tmp_path))
  _write(first, range(1, 6), 1.0)
  first.close()
  time.sleep(1.1)
  second = summaries.create_writer(str(tmp_path), resumed_from_step=3)
  _write(second, range(4, 7), 2.0)
  second.close()
  assert [v for _, v in _scalars(tmp_path)] == [1.0] * 3 + [2.0] * 3


def test_without_the_marker_tensorboard_keeps_both_values(tmp_path):
  """The failure the marker exists for (checks the test's premise)."""
  first = tf.summary.create_file_writer(str(tmp_path))
  _write(first, range(1, 6), 1.0)
  first.close()
  time.sleep(1.1)
  second = tf.summary.create_file_writer(str(tmp_path))
  _write(second, range(4, 7), 2.0)
  second.close()
  steps = [s for s, _ in _scalars(tmp_path)]
  assert steps.count(4) == 2 and steps.count(5) == 2
