"""tinynpu.simulator"""
