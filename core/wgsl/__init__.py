"""The WGSL wing: what a kernel's source declares, read without tuning anything.

``declarations`` reflects a module's bindings, structs, overrides, consts and entry points;
``syntax`` is its lexical layer; ``layout`` knows the bytes a shader reads. Nothing here imports
another wing: WGSL text in, declarations and bytes out.
"""
