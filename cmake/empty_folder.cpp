// Compiled into a folder target that has no sources yet.
