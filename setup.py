"""Installs the L2O-Scale TF2 port: packages l2o_scale, optimizer, problems
and the entry scripts metarun.py / metatest.py."""

from setuptools import find_packages, setup

setup(
    name="l2o-scale",
    version="0.1.0",
    description=("TensorFlow 2 port of L2O-Scale (Wichrowska et al., 2017) "
                 "and its L2O-Entropy extension (Yang et al., 2023)"),
    python_requires=">=3.11",
    packages=find_packages(include=["l2o_scale", "l2o_scale.*", "optimizer",
                                    "optimizer.*", "problems", "problems.*"]),
    py_modules=["metarun", "metatest"],
    # Recipes (metarun --recipe) and the shipped pretrained optimizers
    # (l2o_scale.pretrained: checkpoint and run record of each name).
    package_data={"l2o_scale": ["config/recipes/*.flags"],
                  "optimizer": ["native/*.cc"],
                  "l2o_scale.pretrained": ["*/*/model.ckpt-0.*",
                                           "*/*/run_record.json",
                                           "*/*/schedule_head.npz"]},
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tensorflow-datasets",
        "tensorboard",
        "numpy",
        "absl-py",
        "matplotlib",
    ],
    extras_require={
        "docs": ["mkdocs>=1.6,<2"],
        # The test suite builds the documentation in strict mode.
        "test": ["pytest", "pytest-xdist", "mkdocs>=1.6,<2"],
    },
)
