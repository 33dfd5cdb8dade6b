"""The learned pause model: features of a decode step, the model, and its training.

``pause_features`` (what a step looks like to the model), ``pause_model`` (the logistic
model and its stored form), ``pause_training`` (fitting it on reviewed sessions). The
``learned`` policy kind (inference/policies/learned.py) reads a trained model.
"""
