"""The GPU wing: the seam between the core and a device, and what is read off one.

``device`` is the interface a backend implements (and the limits a launch must fit),
``launch_check`` why a launch would be refused, ``comparison`` how two outputs compare,
``clock`` the grain of the device's timer.
"""
