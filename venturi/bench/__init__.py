"""The benchmark behind ``venturi bench``: loaded by that command only, never by the library."""
