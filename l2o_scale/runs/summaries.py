"""TensorBoard summary writers for runs that may have been resumed.

Why: a run killed after it wrote summaries past its last
checkpoint writes those steps again when it resumes, and TensorBoard then
shows two values for one step. The TF1 original avoided this with the
``SessionLog.START`` event its ``Supervisor`` wrote on every (re)start:
TensorBoard drops every event read before it whose step is at or after the
START event's step (its "purge orphaned data", on by default). TF2's
``tf.summary`` writer cannot write that event, so :func:`create_writer` writes
it into a small events file of its own at every run start, named to sort
after the killed run's files and before the new writer's (TensorBoard reads
a folder's event files in name order).
"""

import os
import socket
import time

import tensorflow as tf
from tensorboard.compat.proto import event_pb2


MARKER_SUFFIX = ".start"


def write_start_marker(logdir, resumed_from_step=None):
  """Writes the ``SessionLog.START`` events of a run start into their own
  events file; returns its path.

  TensorBoard takes the first START it reads as the start of the run and
  every later one as a restart, dropping the events read before it at or
  after its step. So the first start of a run writes a START at step 0, and a
  resume one at ``resumed_from_step + 1`` (preceded by the step-0 START when
  the folder has none yet, e.g. a run begun by an older version). The file's
  name carries the current time minus one second: it sorts after every events
  file of the killed process (created at least a second ago) and before the
  file a writer created now gets (``events.out.tfevents.<now>.<host>...``).
  """
  steps = []
  if not tf.io.gfile.glob(os.path.join(
      logdir, "events.out.tfevents.*" + MARKER_SUFFIX)):
    steps.append(0)
  if resumed_from_step is not None:
    steps.append(int(resumed_from_step) + 1)
  path = os.path.join(logdir, "events.out.tfevents.{}.{}{}".format(
      int(time.time()) - 1, socket.gethostname(), MARKER_SUFFIX))
  start = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
  events = [event_pb2.Event(wall_time=time.time(),
                            file_version="brain.Event:2")]
  events += [event_pb2.Event(wall_time=time.time(), step=step,
                             session_log=start) for step in steps]
  with tf.io.TFRecordWriter(path) as records:
    for event in events:
      records.write(event.SerializeToString())
  return path


def create_writer(logdir, resumed_from_step=None):
  """``tf.summary`` writer for ``logdir``, after the START marker of this
  run start: if the run resumes a checkpoint taken after
  ``resumed_from_step`` meta-updates, summaries the killed run wrote for
  later steps are dropped by TensorBoard (the resumed run writes them again
  from step ``resumed_from_step + 1``)."""
  write_start_marker(logdir, resumed_from_step)
  return tf.summary.create_file_writer(logdir)
