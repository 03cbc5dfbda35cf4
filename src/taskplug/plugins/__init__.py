"""The built-in plugins, each a package registered through the ``taskplug.plugins`` entry points."""

__all__: list[str] = []
