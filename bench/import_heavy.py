"""An import-heavy script for the bench: a dozen stdlib packages, as a real script's first lines
pull in. What it costs is mostly reading (or compiling) their bytecode."""
import argparse
import asyncio
import collections
import csv
import dataclasses
import datetime
import decimal
import email.message
import http.client
import json
import logging
import pathlib
import re
import sqlite3
import unittest
import urllib.parse
import xml.etree.ElementTree

print(len(json.dumps({"modules": len(__import__("sys").modules)})))
