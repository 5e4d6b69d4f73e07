"""Runtime: the network's steps executed, on the simulator in one DRAM image or as the numpy reference.

- :mod:`.execute`: the steps in order, each reading its inputs back from the image;
- :mod:`.layers`: accelerator steps, each program relocated into the image and run;
- :mod:`.host`: host steps (integer pools, adds, joins; ONNX operators);
- :mod:`.image`: the DRAM image itself (placement, relocation, staging).
"""
