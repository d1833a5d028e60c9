"""Tests of the Helm chart: its rendered objects, and its processes run on loopback."""
