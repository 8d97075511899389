"""Test kit: a scripted model, and checks users can run on their own tools and models."""

from ._scripted import PausePoint as PausePoint
from ._scripted import ScriptedModel as ScriptedModel
from ._scripted import events_for as events_for

__all__ = ["PausePoint", "ScriptedModel", "events_for"]
