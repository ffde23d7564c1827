"""The validation family: published figures and the checks against them."""
