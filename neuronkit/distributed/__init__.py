"""Distributed training on Trainium: plan a parallel layout's memory and traffic before renting."""
