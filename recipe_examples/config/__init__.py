"""Entry point of the recipe example: ``sis m -r`` (without a config name) runs ``config.main``."""

from . import sharded_training


def main():
    sharded_training.run()
