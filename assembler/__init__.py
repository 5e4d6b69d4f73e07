"""tinynpu.assembler"""
