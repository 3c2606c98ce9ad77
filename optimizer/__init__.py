"""Learned optimizers of L2O-Scale, ported to TensorFlow 2.

Mirrors the original ``optimizer/`` package of
``L2O-Scale-Training`` / ``L2O-Scale-Evaluation`` module for module.
"""
